#pragma once
// Reader for the safetensors format (https://huggingface.co/docs/safetensors):
//   [u64 little-endian N][N bytes of JSON header][data section]
// The header maps tensor names to {dtype, shape, data_offsets} (offsets are
// relative to the data section) plus an optional "__metadata__" string map.
//
// Everything is validated before any tensor is touched: header length bounds,
// JSON shape, supported dtype (F32, F16, BF16), non-negative shape, byte size
// == product(shape) * dtype size (overflow checked), offsets inside the data
// section, no two tensors overlapping. Failures throw ts::Error with one line
// naming the file and the tensor / field.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/mapped_file.h"

namespace ts {

// The floating types the loaders convert. Other dtypes of the safetensors
// spec (BOOL, I64, F64, ...) parse as Unsupported, so a file whose ignored
// buffers use them (e.g. a BOOL attn.bias mask) still loads; a loader refuses
// an Unsupported tensor it needs. A dtype string outside the spec is an error.
enum class DType { F32, F16, BF16, Unsupported };

const char* dtype_name(DType dtype);  // "F32", "F16", "BF16", "unsupported"
size_t dtype_size(DType dtype);       // 4, 2, 2, 0

// Makes untrusted text (tensor names, JSON snippets) safe for a one-line
// message: control and non-ASCII bytes become \xNN, long text is shortened.
std::string printable(std::string_view text, size_t max_len = 120);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::string dtype_string;  // as written in the header, e.g. "BF16", "I64"
  size_t element_size = 4;   // bytes per element of dtype_string
  std::vector<int64_t> shape;
  uint64_t begin = 0;             // data_offsets[0], relative to the data section
  uint64_t end = 0;               // data_offsets[1]
  const uint8_t* data = nullptr;  // start of the bytes (inside the parsed buffer)

  uint64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
  std::string shape_string() const;  // e.g. "[768, 2304]"
};

struct SafetensorsHeader {
  uint64_t header_length = 0;       // N
  uint64_t data_offset = 0;         // 8 + N: where the data section starts
  uint64_t data_size = 0;           // bytes in the data section
  std::vector<TensorInfo> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
};

inline constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;  // 100 MB

// Parses and validates a whole safetensors image held in memory. `name` is the
// file name used in error messages. TensorInfo::data points into `data`.
SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, const std::string& name);

// A memory-mapped, validated safetensors file. By default the map is
// populated at open (MappedFile::Populate::kYes), for a reader that uses the
// tensors in place; the model loader copies them out once and asks for kNo.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path,
                           MappedFile::Populate populate = MappedFile::Populate::kYes);

  const std::string& name() const { return name_; }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const SafetensorsHeader& header() const { return header_; }
  const MappedFile& file() const { return file_; }

  // nullptr when absent.
  const TensorInfo* find(std::string_view tensor_name) const;

  // The tensor's fp32 values in place (zero copy) when it is F32 and 4-byte
  // aligned in memory; nullptr otherwise (then use to_f32).
  static const float* f32_in_place(const TensorInfo& t);
  // Converts / copies an F32 / F16 / BF16 tensor into dst[0 .. numel).
  static void to_f32(const TensorInfo& t, float* dst);

 private:
  std::string name_;
  MappedFile file_;
  SafetensorsHeader header_;
};

}  // namespace ts
