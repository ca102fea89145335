#include "util/paths.h"

#include <cstdlib>
#include <system_error>

// The data folder relative to the folder of the installed executables
// (CMake's CMAKE_INSTALL_DATADIR/tokenscope seen from CMAKE_INSTALL_BINDIR).
#ifndef TS_DATA_FROM_BIN
#define TS_DATA_FROM_BIN "../share/tokenscope"
#endif

namespace ts {
namespace fs = std::filesystem;

fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return exe.parent_path();
}

std::vector<fs::path> data_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("TOKENSCOPE_DATA_DIR"); env && *env) dirs.emplace_back(env);
  const fs::path exe = executable_dir();
  if (!exe.empty()) {
    dirs.push_back((exe / TS_DATA_FROM_BIN).lexically_normal());
    dirs.push_back(exe / "share" / "tokenscope");
  }
  return dirs;
}

fs::path find_data(const fs::path& relative) {
  std::error_code ec;
  for (const fs::path& dir : data_dirs())
    if (fs::exists(dir / relative, ec)) return dir / relative;
  return {};
}

fs::path find_font() {
  if (const char* env = std::getenv("TOKENSCOPE_FONT"); env && *env) return env;
  if (fs::path bundled = find_data("fonts/DejaVuSans.ttf"); !bundled.empty()) return bundled;
  std::error_code ec;
  for (const char* p :
       {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf"})
    if (fs::exists(p, ec)) return p;
  return {};
}

}  // namespace ts
