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

// The bundled model: $TS_BUNDLED_MODEL_DIR when set (the GPU bundle carries
// it beside the test binary), else the checkout's assets/models/tokenscope-tiny.
inline std::filesystem::path bundled_model_dir() {
  if (const char* env = std::getenv("TS_BUNDLED_MODEL_DIR"); env && *env) return env;
#ifdef TS_SOURCE_DIR
  return std::filesystem::path(TS_SOURCE_DIR) / "assets/models/tokenscope-tiny";
#else
  return {};
#endif
}

}  // namespace ts::test
