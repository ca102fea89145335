#pragma once
// Where the committed test fixtures live: $TS_FIXTURE_DIR when set (read at
// run time, so a test binary copied to another machine or run from another
// checkout finds them), else the folder CMake configured.
#include <cstdlib>
#include <filesystem>

namespace ts::test {

inline std::filesystem::path fixture_dir() {
  if (const char* env = std::getenv("TS_FIXTURE_DIR"); env && *env) return env;
  return TS_FIXTURE_DIR;
}
inline std::filesystem::path tiny_model_dir() { return fixture_dir() / "tiny"; }

}  // namespace ts::test
