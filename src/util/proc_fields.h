#pragma once
// The "Key:   value kB" fields of a Linux /proc file (/proc/self/status,
// /proc/meminfo), in bytes. One reader for the memory report, the loader's
// choice of where the weights live, and the soak programs.
#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <string_view>

namespace ts {

class ProcFields {
 public:
  // Every line "Key: <integer> kB"; other lines (other units, no number,
  // out of range) are left out.
  static ProcFields parse(std::istream& in);
  // An empty set when the file cannot be read (not Linux, no /proc).
  static ProcFields read(const std::string& path);

  // The field in bytes, or `missing` when it was not there.
  int64_t bytes(std::string_view key, int64_t missing = -1) const;

 private:
  std::map<std::string, int64_t, std::less<>> bytes_;
};

}  // namespace ts
