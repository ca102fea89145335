// Replays files through a fuzz target's entry point without libFuzzer: the
// normal (GCC, sanitizer) builds run every committed seed and every crash
// found so far (tests/fuzz_regressions/<target>/) through the same code.
//   ts_fuzz_replay_<target> [--if-exists] DIR_OR_FILE...
// --if-exists: the paths after it may be missing (a target with no crash
// recorded has no regression directory).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  bool optional = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--if-exists") {
      optional = true;
      continue;
    }
    const fs::path p = argv[i];
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.')
          files.push_back(e.path());
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else if (!optional) {
      std::fprintf(stderr, "replay: %s: not found\n", argv[i]);
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "replay: no input files\n");
    return 2;
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", f.string().c_str(), bytes.size());
    // A copy of exactly the file's size, so a sanitizer sees any overread.
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    static uint8_t none = 0;
    LLVMFuzzerTestOneInput(data.empty() ? &none : data.data(), data.size());
  }
  std::printf("replay: %zu inputs, no crash\n", files.size());
  return 0;
}
