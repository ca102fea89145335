#pragma once
// Internal to the session file reader (session_import.cpp and
// session_import_lanes.cpp): the checked reads of the JSON document, each
// failure one line naming the file and the field's place, and the readers of
// the lane kinds' step records (beams, contrastive candidates, speculative
// rounds, DoLa layers, lookahead passes).
#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"
#include "session/replay_codec.h"
#include "session/session_import.h"
#include "trace/step_trace.h"
#include "util/error.h"

namespace ts::session_import {

using nlohmann::json;

// A field's place in the document ("steps[3].replay.lanes[0].logits") and
// the checked reads of it. Every read failure throws "FILE: PATH: reason".
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& why) const {
    throw Error(file_ + ": " + (where.empty() ? "" : where + ": ") + why);
  }

  const json& field(const json& obj, const std::string& where, const char* key) const {
    if (!obj.is_object()) fail(where, "expected an object");
    const auto it = obj.find(key);
    if (it == obj.end()) fail(where, std::string("missing \"") + key + "\"");
    return *it;
  }

  int64_t integer(const json& v, const std::string& where, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) fail(where, "expected an integer");
    int64_t x = 0;
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > uint64_t(std::numeric_limits<int64_t>::max())) fail(where, "out of range");
      x = static_cast<int64_t>(u);
    } else {
      x = v.get<int64_t>();
    }
    if (x < lo || x > hi)
      fail(where,
           std::to_string(x) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
    return x;
  }
  int integer(const json& obj, const std::string& where, const char* key, int lo, int hi) const {
    return static_cast<int>(integer(field(obj, where, key), where + "." + key, lo, hi));
  }
  uint64_t unsigned64(const json& obj, const std::string& where, const char* key) const {
    const json& v = field(obj, where, key);
    if (!v.is_number_unsigned()) fail(where + "." + key, "expected a non-negative integer");
    return v.get<uint64_t>();
  }
  // A number, or "inf" / "-inf" / "nan" (the export writes non-finite numbers as strings).
  double number(const json& v, const std::string& where) const {
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    }
    fail(where, "expected a number");
  }
  double number(const json& obj, const std::string& where, const char* key) const {
    return number(field(obj, where, key), where + "." + key);
  }
  bool boolean(const json& obj, const std::string& where, const char* key) const {
    const json& v = field(obj, where, key);
    if (!v.is_boolean()) fail(where + "." + key, "expected true or false");
    return v.get<bool>();
  }
  const std::string& string(const json& obj, const std::string& where, const char* key) const {
    const json& v = field(obj, where, key);
    if (!v.is_string()) fail(where + "." + key, "expected a string");
    return v.get_ref<const std::string&>();
  }
  const json& array(const json& v, const std::string& where, size_t max_size) const {
    if (!v.is_array()) fail(where, "expected an array");
    if (v.size() > max_size)
      fail(where, std::to_string(v.size()) + " entries, at most " + std::to_string(max_size));
    return v;
  }
  const json& array(const json& obj, const std::string& where, const char* key,
                    size_t max_size) const {
    return array(field(obj, where, key), where + "." + key, max_size);
  }
  std::vector<int> ints(const json& obj, const std::string& where, const char* key, size_t max_size,
                        int lo, int hi) const {
    const std::string w = where + "." + key;
    const json& a = array(obj, where, key, max_size);
    std::vector<int> out;
    out.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i)
      out.push_back(static_cast<int>(integer(a[i], w + "[" + std::to_string(i) + "]", lo, hi)));
    return out;
  }
  std::vector<float> floats(const json& obj, const std::string& where, const char* key,
                            size_t max_size) const {
    const std::string w = where + "." + key;
    const json& a = array(obj, where, key, max_size);
    std::vector<float> out;
    for (size_t i = 0; i < a.size(); ++i)
      out.push_back(static_cast<float>(number(a[i], w + "[" + std::to_string(i) + "]")));
    return out;
  }
  std::vector<float> packed(const json& v, const std::string& where, size_t count,
                            bool half) const {
    if (!v.is_string()) fail(where, "expected a base64 string");
    const std::string& text = v.get_ref<const std::string&>();
    auto values = half ? replay::unpack_f16(text, count) : replay::unpack_f32(text, count);
    if (!values)
      fail(where, "expected " + std::to_string(count) +
                      (half ? " half floats" : " float32 values") + " in base64 (" +
                      std::to_string(text.size()) + " characters)");
    return std::move(*values);
  }

 private:
  std::string file_;
};

inline std::string at(const std::string& where, size_t i) {
  return where + "[" + std::to_string(i) + "]";
}

struct Shape {
  ModelConfig config;
  int lanes = 0;
  int steps = 0;
};

std::shared_ptr<const BeamStep> read_beam(const Reader& r, const json& j, const std::string& w,
                                          const Shape& s);
std::shared_ptr<const ContrastiveStep> read_contrastive(const Reader& r, const json& j,
                                                        const std::string& w, const Shape& s,
                                                        int context);
std::shared_ptr<const SpecRound> read_spec(const Reader& r, const json& j, const std::string& w,
                                           const Shape& s, int rows);
std::shared_ptr<const DolaStep> read_dola(const Reader& r, const json& j, const std::string& w,
                                          const Shape& s);
std::shared_ptr<const LookaheadPass> read_lookahead(const Reader& r, const json& j,
                                                    const std::string& w, const Shape& s,
                                                    const LaneStep& ls);

}  // namespace ts::session_import
