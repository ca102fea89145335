#include "util/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include "util/error.h"

namespace ts {
namespace fs = std::filesystem;

void write_file_atomically(const fs::path& file, std::string_view bytes) {
  if (file.empty()) throw Error("no file name given");
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  if (fs::is_directory(st)) throw Error(file.string() + ": is a directory");
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw Error(file.string() + ": not a regular file");
  if (!file.has_filename()) throw Error(file.string() + ": no file name given");
  const fs::path tmp = fs::path(file.string() + ".tmp-" + std::to_string(::getpid()));
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
  fs::rename(tmp, file, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw Error(file.string() + ": cannot write (" + ec.message() + ")");
  }
}

}  // namespace ts
