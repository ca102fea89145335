// Data found at run time beside the executable (util/paths.h), never at a
// path compiled into the binary.
#include "util/paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "scoped_env.h"
#include "session/model_setup.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

using test::ScopedEnv;

TEST(Paths, SearchesTheUsersFolderThenBesideTheExecutable) {
  const fs::path exe = executable_dir();
  ASSERT_FALSE(exe.empty());
  EXPECT_TRUE(fs::exists(exe / "ts_tests")) << exe;
  const fs::path tmp = fs::temp_directory_path() / ("ts-paths-" + std::to_string(getpid()));
  fs::create_directories(tmp / "models" / "m");
  std::ofstream(tmp / "models" / "m" / "config.json") << "{}";
  {
    ScopedEnv env("TOKENSCOPE_DATA_DIR", tmp.string());
    const auto dirs = data_dirs();
    ASSERT_EQ(dirs.size(), 3u);
    EXPECT_EQ(dirs[0], tmp);
    EXPECT_EQ(dirs[1], (exe / "../share/tokenscope").lexically_normal());  // an install
    EXPECT_EQ(dirs[2], exe / "share" / "tokenscope");                      // the build tree
    EXPECT_EQ(find_data("models/m"), tmp / "models/m");
    EXPECT_TRUE(find_data("models/no-such-model").empty());
  }
  fs::remove_all(tmp);
}

// The test binary sits in the build folder, whose share/tokenscope links to
// the source tree's assets: the bundled model is found there.
TEST(Paths, BundledModelIsFoundInTheBuildTree) {
  ScopedEnv none("TOKENSCOPE_MODEL", "");
  const fs::path model = default_model_path();
  EXPECT_EQ(model, executable_dir() / "share/tokenscope/models/tokenscope-tiny");
  EXPECT_TRUE(fs::exists(model / "config.json")) << model;
}

}  // namespace
}  // namespace ts
