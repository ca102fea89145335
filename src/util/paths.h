#pragma once
// Where TokenScope's data (bundled model, shaders, fonts) is found at run
// time. Nothing here is fixed when the program is compiled: the data is looked
// up beside the running executable, so an installed tree and a build tree
// both work wherever they are moved.
//
// Layouts searched, in order:
//   $TOKENSCOPE_DATA_DIR/<relative>            (set by the user)
//   <exe dir>/<data dir relative to bin>/<relative>   (an install: bin/ beside
//                                              share/tokenscope/)
//   <exe dir>/share/tokenscope/<relative>     (a build tree: CMake links the
//                                              source folders there)
#include <filesystem>
#include <vector>

namespace ts {

// The folder of the running executable; empty when the system does not say.
std::filesystem::path executable_dir();

// The data folders searched, in the order above (existing or not).
std::vector<std::filesystem::path> data_dirs();

// The first data folder that holds `relative` (a file or a folder), joined
// with it; empty when none does.
std::filesystem::path find_data(const std::filesystem::path& relative);

// The font the window uses: $TOKENSCOPE_FONT, a bundled fonts/DejaVuSans.ttf,
// then the usual system places of DejaVu Sans. Empty when none exists.
std::filesystem::path find_font();

}  // namespace ts
