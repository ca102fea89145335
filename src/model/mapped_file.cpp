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

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  const std::string name = path.string();
  Fd f;
  do {
    f.fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  } while (f.fd < 0 && errno == EINTR);
  if (f.fd < 0) throw Error(name + ": cannot open: " + errno_text(errno));

  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw Error(name + ": cannot stat: " + errno_text(errno));
  if (S_ISDIR(st.st_mode)) throw Error(name + ": is a directory, expected a file");
  if (!S_ISREG(st.st_mode)) throw Error(name + ": not a regular file");
  if (st.st_size < 0) throw Error(name + ": cannot stat: negative size");
  const auto size = static_cast<unsigned long long>(st.st_size);
  if (size > static_cast<unsigned long long>(SIZE_MAX))
    throw Error(name + ": file too large to map");
  if (size == 0) return;  // nothing to map; data() == nullptr, size() == 0

  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, f.fd, 0);
  if (p == MAP_FAILED) throw Error(name + ": cannot mmap: " + errno_text(errno));
  data_ = static_cast<const uint8_t*>(p);
  size_ = static_cast<size_t>(size);
}

MappedFile::~MappedFile() { reset(); }

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

}  // namespace ts
