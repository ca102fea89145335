#include "util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include "util/error.h"

namespace ts {
namespace fs = std::filesystem;

namespace {

constexpr long kProcMagic = 0x9fa0;       // PROC_SUPER_MAGIC (linux/magic.h)
constexpr long kSysfsMagic = 0x62656572;  // SYSFS_MAGIC

// Whether `dir` is on /proc or /sys: their files are the kernel's, not files
// a trace or an image can be written to.
bool on_kernel_fs(const fs::path& dir) {
  struct statfs s {};
  if (::statfs(dir.empty() ? "." : dir.c_str(), &s) != 0) return false;
  return static_cast<long>(s.f_type) == kProcMagic || static_cast<long>(s.f_type) == kSysfsMagic;
}

// The symbolic link chain followed by hand: a dangling link names the file
// to create, and a link in /proc (/proc/self/fd/1, reached from /dev/stdout)
// is a process's open file, not a path to follow.
WriteTarget follow_links(const fs::path& file) {
  fs::path p = file;
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return {p, true};
    if (on_kernel_fs(p.parent_path())) return {p, false};
    if (hops == 40) throw Error(file.string() + ": too many levels of symbolic links");
    std::error_code ec;
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) throw Error(file.string() + ": cannot read the link (" + ec.message() + ")");
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
}

}  // namespace

WriteTarget check_write_target(const fs::path& file) {
  if (file.empty()) throw Error("no file name given");
  WriteTarget t = follow_links(file);
  std::error_code ec;
  const fs::file_status st = fs::status(t.path, ec);
  if (fs::is_directory(st)) throw Error(file.string() + ": is a directory");
  if (!t.replace || (fs::exists(st) && !fs::is_regular_file(st))) {
    // Written in place: an open file, a device or a FIFO (not opened here:
    // a FIFO's open would wait for its reader).
    t.replace = false;
    return t;
  }
  if (fs::exists(st) && on_kernel_fs(t.path.parent_path()))
    throw Error(file.string() + ": a file of /proc or /sys, not one to write to");
  if (!t.path.has_filename()) throw Error(file.string() + ": no file name given");
  // The temporary file is made and removed once, so that a folder where no
  // file can be made is refused now rather than after the work.
  const fs::path probe = fs::path(t.path.string() + ".tmp-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    if (err != EEXIST)
      throw Error(file.string() + ": cannot open for writing (" + std::strerror(err) + ")");
    return t;  // this process's own temporary file: it is replaced when written
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return t;
}

void write_file_atomically(const fs::path& file, std::string_view bytes, bool in_place_ok) {
  const WriteTarget t = check_write_target(file);
  if (!t.replace && !in_place_ok) throw Error(file.string() + ": not a regular file");
  if (!t.replace) {
    std::ofstream out(t.path, std::ios::binary | std::ios::app);
    if (!out)
      throw Error(file.string() + ": cannot open for writing (" + std::strerror(errno) + ")");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) throw Error(file.string() + ": write failed (" + std::strerror(errno) + ")");
    return;
  }
  const fs::path tmp = fs::path(t.path.string() + ".tmp-" + std::to_string(::getpid()));
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw Error(file.string() + ": cannot open for writing (" + std::strerror(errno) + ")");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      const std::string why = std::strerror(errno);
      out.close();
      fs::remove(tmp, ec);
      throw Error(file.string() + ": write failed (" + why + ")");
    }
  }
  fs::rename(tmp, t.path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw Error(file.string() + ": cannot write (" + ec.message() + ")");
  }
}

}  // namespace ts
