#include "model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "util/error.h"

namespace ts {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// What a stat mode is, for "not a regular file (a FIFO)".
const char* file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

void check_mode(const std::string& name, mode_t mode) {
  if (S_ISDIR(mode)) throw Error(name + ": is a directory, expected a file");
  if (!S_ISREG(mode)) throw Error(name + ": not a regular file (" + file_kind(mode) + ")");
}

// Opens a regular file for reading without ever blocking: the type is checked
// by name first (a FIFO is refused before open() could wait for a writer),
// then the descriptor is opened with O_NONBLOCK and checked again.
Fd open_regular(const std::string& name, struct stat* st) {
  struct stat by_name {};
  if (::stat(name.c_str(), &by_name) != 0)
    throw Error(name + ": cannot open: " + errno_text(errno));
  check_mode(name, by_name.st_mode);
  Fd f;
  do {
    f.fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (f.fd < 0 && errno == EINTR);
  if (f.fd < 0) throw Error(name + ": cannot open: " + errno_text(errno));
  if (::fstat(f.fd, st) != 0) throw Error(name + ": cannot stat: " + errno_text(errno));
  check_mode(name, st->st_mode);
  if (st->st_size < 0) throw Error(name + ": cannot stat: negative size");
  return f;
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path, Populate populate) : path_(path) {
  const std::string name = path.string();
  struct stat st {};
  Fd f = open_regular(name, &st);
  const auto size = static_cast<unsigned long long>(st.st_size);
  if (size > static_cast<unsigned long long>(SIZE_MAX))
    throw Error(name + ": file too large to map");
  if (size == 0) return;  // nothing to map; data() == nullptr, size() == 0

  const int flags = MAP_PRIVATE | (populate == Populate::kYes ? MAP_POPULATE : 0);
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, flags, f.fd, 0);
  if (p == MAP_FAILED) throw Error(name + ": cannot mmap: " + errno_text(errno));
  data_ = static_cast<const uint8_t*>(p);
  size_ = static_cast<size_t>(size);
  if (populate == Populate::kYes) {
    // MAP_POPULATE is best effort (it gives up silently under memory
    // pressure); the advice asks the kernel to keep reading ahead.
    ::madvise(p, size_, MADV_WILLNEED);
  }
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::release(const void* p, size_t bytes) const {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const auto map_begin = reinterpret_cast<uintptr_t>(data_);
  if (data_ == nullptr || begin < map_begin || bytes > size_ || begin - map_begin > size_ - bytes)
    return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page;  // whole pages only
  const uintptr_t last = (begin + bytes) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::reset() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

FileReader::FileReader(const std::filesystem::path& path) : name_(path.string()) {
  struct stat st {};
  Fd f = open_regular(name_, &st);
  fd_ = std::exchange(f.fd, -1);
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

void FileReader::read(uint64_t offset, void* dst, size_t bytes) const {
  auto* out = static_cast<uint8_t*>(dst);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, out + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(name_ + ": read error: " + errno_text(errno));
    if (n == 0) throw Error(name_ + ": the file ended while being read (did it shrink?)");
    done += static_cast<size_t>(n);
  }
}

std::string read_regular_file(const std::filesystem::path& path, uint64_t max_bytes,
                              const std::string& what) {
  const std::string name = path.string();
  struct stat st {};
  Fd f = open_regular(name, &st);
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    throw Error(name + ": is " + std::to_string(size) + " bytes, too large for " + what);
  }
  std::string text(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(f.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(name + ": read error: " + errno_text(errno));
    if (n == 0) break;  // the file shrank while being read
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

}  // namespace ts
