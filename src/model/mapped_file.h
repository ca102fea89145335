#pragma once
// A read-only memory map of a whole file (RAII). Failures to open, stat or map
// throw ts::Error naming the path. An empty file maps to {nullptr, 0}.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace ts {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void reset() noexcept;

  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ts
