#pragma once
// A read-only memory map of a whole file (RAII). Failures to open, stat or map
// throw ts::Error naming the path. An empty file maps to {nullptr, 0}.
//
// Only regular files are opened: a FIFO would block open() until a writer
// appears (forever), and a device such as /dev/zero never ends. The type is
// checked before opening and again on the descriptor (opened non-blocking, so
// a file swapped for a FIFO in between cannot block either).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace ts {

class MappedFile {
 public:
  // kYes reads every page in at map time (MAP_POPULATE), so the first pass
  // over the data does not pay the page faults: weights are resident after
  // loading and the first timed forward pass costs what the later ones do.
  enum class Populate { kNo, kYes };

  MappedFile() = default;
  explicit MappedFile(const std::filesystem::path& path, Populate populate = Populate::kNo);
  ~MappedFile();

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::filesystem::path& path() const { return path_; }

  // Done with [p, p + bytes) (inside the map): its whole pages leave this
  // process's resident memory (MADV_DONTNEED; the file's page cache keeps
  // them, and touching them again reads them back in). A loader copying out
  // of the map calls it as it goes, so a model is not resident twice.
  void release(const void* p, size_t bytes) const;

 private:
  void reset() noexcept;

  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Byte ranges of a regular file read with pread (same checks as MappedFile).
// Copying a model's tensors this way costs one system call per tensor; through
// a map that was not populated it cost a page fault per 4 KB (0.5-1.4 s more
// to load GPT-2 124M on a 2-vCPU VM).
class FileReader {
 public:
  explicit FileReader(const std::filesystem::path& path);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  // Fills dst with `bytes` bytes from `offset`; throws ts::Error naming the
  // file on a read error or when the file ends first (it shrank).
  void read(uint64_t offset, void* dst, size_t bytes) const;

 private:
  std::string name_;
  int fd_ = -1;
};

// Reads a whole regular file (same checks as MappedFile) into a string;
// throws ts::Error naming the path when it is not a regular file, cannot be
// read, or is larger than max_bytes (`what` names the kind of file in that
// message, e.g. "a config").
std::string read_regular_file(const std::filesystem::path& path, uint64_t max_bytes,
                              const std::string& what);

}  // namespace ts
