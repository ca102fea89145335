#pragma once
// Writing a whole file so that it is never seen half-written: the bytes go
// to a temporary file beside it, which is renamed into place when complete.
#include <filesystem>
#include <string_view>

namespace ts {

// Throws ts::Error with one line naming the file and the reason (an empty
// path, a directory, a missing folder, no permission, a full disk); the
// file is then as it was before, and no temporary file is left behind.
void write_file_atomically(const std::filesystem::path& file, std::string_view bytes);

}  // namespace ts
