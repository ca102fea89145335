#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "model/half_float.h"
#include "util/error.h"

namespace ts {

using nlohmann::json;

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::Unsupported:
      return "unsupported";
  }
  return "?";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 4;
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::Unsupported:
      return 0;
  }
  return 0;
}

std::string printable(std::string_view text, size_t max_len) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max_len) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);  // validated not to overflow
  return n;
}

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw Error(file + ": " + what);
}

std::string tensor_ctx(const std::string& tensor) { return "tensor " + printable(tensor) + ": "; }

// A JSON value that must be a non-negative integer; `what` names it in errors.
uint64_t as_non_negative(const json& v, const std::string& file, const std::string& what) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    fail(file, what + " is " + std::to_string(v.get<int64_t>()) + ", must be non-negative");
  }
  fail(file, what + " is " + printable(v.dump(), 40) + ", must be a non-negative integer");
}

// Every dtype of the safetensors spec with its element size; false if unknown.
bool parse_dtype(const std::string& s, DType* out, size_t* size) {
  struct Entry {
    const char* name;
    DType dtype;
    size_t size;
  };
  static const Entry kTable[] = {
      {"F32", DType::F32, 4},
      {"F16", DType::F16, 2},
      {"BF16", DType::BF16, 2},
      {"F64", DType::Unsupported, 8},
      {"I64", DType::Unsupported, 8},
      {"U64", DType::Unsupported, 8},
      {"I32", DType::Unsupported, 4},
      {"U32", DType::Unsupported, 4},
      {"I16", DType::Unsupported, 2},
      {"U16", DType::Unsupported, 2},
      {"I8", DType::Unsupported, 1},
      {"U8", DType::Unsupported, 1},
      {"BOOL", DType::Unsupported, 1},
      {"F8_E4M3", DType::Unsupported, 1},
      {"F8_E5M2", DType::Unsupported, 1},
  };
  for (const Entry& e : kTable) {
    if (s == e.name) {
      *out = e.dtype;
      *size = e.size;
      return true;
    }
  }
  return false;
}

TensorInfo parse_entry(const std::string& file, const std::string& key, const json& entry,
                       uint64_t data_size) {
  const std::string ctx = tensor_ctx(key);
  if (!entry.is_object()) fail(file, ctx + "entry is not a JSON object");
  TensorInfo t;
  t.name = key;

  const auto dt = entry.find("dtype");
  if (dt == entry.end()) fail(file, ctx + "missing field dtype");
  if (!dt->is_string()) fail(file, ctx + "field dtype is not a string");
  const std::string dtype = dt->get<std::string>();
  if (!parse_dtype(dtype, &t.dtype, &t.element_size)) {
    fail(file, ctx + "unknown dtype " + printable(dtype, 20) + " (supported: F32, F16, BF16)");
  }
  t.dtype_string = dtype;

  const auto sh = entry.find("shape");
  if (sh == entry.end()) fail(file, ctx + "missing field shape");
  if (!sh->is_array()) fail(file, ctx + "field shape is not an array");
  if (sh->size() > 8) fail(file, ctx + "shape has " + std::to_string(sh->size()) + " dimensions");
  uint64_t numel = 1;
  for (size_t i = 0; i < sh->size(); ++i) {
    const uint64_t d = as_non_negative((*sh)[i], file, ctx + "shape[" + std::to_string(i) + "]");
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(file, ctx + "shape[" + std::to_string(i) + "] is too large");
    t.shape.push_back(static_cast<int64_t>(d));
    if (__builtin_mul_overflow(numel, d, &numel))
      fail(file, ctx + "shape has too many elements (size overflows)");
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(t.element_size), &nbytes))
    fail(file, ctx + "shape " + t.shape_string() + " has too many bytes (size overflows)");

  const auto off = entry.find("data_offsets");
  if (off == entry.end()) fail(file, ctx + "missing field data_offsets");
  if (!off->is_array() || off->size() != 2)
    fail(file, ctx + "field data_offsets must be an array of two integers");
  t.begin = as_non_negative((*off)[0], file, ctx + "data_offsets[0]");
  t.end = as_non_negative((*off)[1], file, ctx + "data_offsets[1]");
  const std::string offsets = "[" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
  if (t.begin > t.end) fail(file, ctx + "data_offsets " + offsets + " has begin after end");
  if (t.end > data_size) {
    fail(file, ctx + "data_offsets " + offsets + " outside data section (size " +
                   std::to_string(data_size) + ")");
  }
  if (t.end - t.begin != nbytes) {
    fail(file, ctx + "data_offsets " + offsets + " hold " + std::to_string(t.end - t.begin) +
                   " bytes but dtype " + dtype + " shape " + t.shape_string() + " needs " +
                   std::to_string(nbytes));
  }
  return t;
}

}  // namespace

SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, const std::string& file) {
  if (size < 8) {
    fail(file, "file is " + std::to_string(size) +
                   " bytes, too short for the 8-byte header length (truncated or not safetensors)");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  const uint64_t avail = size - 8;
  if (n < 2) fail(file, "header length " + std::to_string(n) + " is too small (minimum 2)");
  if (n > kSafetensorsMaxHeader) {
    fail(file, "header length " + std::to_string(n) + " exceeds the limit of " +
                   std::to_string(kSafetensorsMaxHeader) + " bytes (corrupt or not safetensors)");
  }
  if (n > avail) {
    fail(file, "header length " + std::to_string(n) + " exceeds the " + std::to_string(avail) +
                   " bytes after the length field (truncated file)");
  }

  SafetensorsHeader h;
  h.header_length = n;
  h.data_offset = 8 + n;
  h.data_size = avail - n;

  json root;
  try {
    const auto* begin = reinterpret_cast<const char*>(data + 8);
    root = json::parse(begin, begin + n);
  } catch (const json::parse_error& e) {
    fail(file, e.byte > n ? "header is not valid JSON (it ends early)"
                          : "header is not valid JSON (error at byte " + std::to_string(e.byte) +
                                " of " + std::to_string(n) + ")");
  } catch (const json::exception&) {
    fail(file, "header is not valid JSON");
  }
  if (!root.is_object()) fail(file, "header is not a JSON object");

  const uint8_t* section = data + h.data_offset;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail(file, "__metadata__ is not a JSON object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) fail(file, "__metadata__ field " + printable(mk) + " is not a string");
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    TensorInfo t = parse_entry(file, key, value, h.data_size);
    t.data = section + t.begin;
    h.tensors.push_back(std::move(t));
  }

  // No two tensors may share bytes. Sort a view by begin; compare each
  // non-empty tensor with the furthest-reaching one before it.
  std::vector<const TensorInfo*> order;
  for (const auto& t : h.tensors)
    if (t.nbytes() > 0) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->name < b->name;
  });
  const TensorInfo* reach = nullptr;
  for (const TensorInfo* t : order) {
    if (reach != nullptr && t->begin < reach->end) {
      fail(file, "tensors " + printable(reach->name) + " and " + printable(t->name) +
                     " overlap (data_offsets [" + std::to_string(reach->begin) + ", " +
                     std::to_string(reach->end) + "] and [" + std::to_string(t->begin) + ", " +
                     std::to_string(t->end) + "])");
    }
    if (reach == nullptr || t->end > reach->end) reach = t;
  }
  return h;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path, MappedFile::Populate populate)
    : name_(path.string()), file_(path, populate) {
  header_ = parse_safetensors(file_.data(), file_.size(), name_);
}

const TensorInfo* SafetensorsFile::find(std::string_view tensor_name) const {
  const auto& ts = header_.tensors;
  auto it = std::lower_bound(ts.begin(), ts.end(), tensor_name,
                             [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  return it != ts.end() && it->name == tensor_name ? &*it : nullptr;
}

const float* SafetensorsFile::f32_in_place(const TensorInfo& t) {
  if (t.dtype != DType::F32) return nullptr;
  if (reinterpret_cast<uintptr_t>(t.data) % alignof(float) != 0) return nullptr;
  return reinterpret_cast<const float*>(t.data);
}

void SafetensorsFile::to_f32(const TensorInfo& t, float* dst) {
  const size_t n = static_cast<size_t>(t.numel());
  if (n == 0) return;
  switch (t.dtype) {
    case DType::F32:
      std::memcpy(dst, t.data, n * sizeof(float));
      break;
    case DType::F16:
      convert_f16_to_f32(t.data, dst, n);
      break;
    case DType::BF16:
      convert_bf16_to_f32(t.data, dst, n);
      break;
    case DType::Unsupported:
      throw Error("tensor " + printable(t.name) + ": unsupported dtype " +
                  printable(t.dtype_string, 20) + " (supported: F32, F16, BF16)");
  }
}

}  // namespace ts
