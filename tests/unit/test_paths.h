#pragma once
// Where the committed test fixtures live.
#include <filesystem>

namespace ts::test {

inline std::filesystem::path fixture_dir() { return TS_FIXTURE_DIR; }
inline std::filesystem::path tiny_model_dir() { return fixture_dir() / "tiny"; }

}  // namespace ts::test
