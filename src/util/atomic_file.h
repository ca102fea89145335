#pragma once
// Writing a whole file so that it is never seen half-written: the bytes go
// to a temporary file beside it, which is renamed into place when complete.
#include <filesystem>
#include <string_view>

namespace ts {

// Where a write to a path lands. Symbolic links are followed to the file
// they name, so that a link stays a link and its target gets the bytes; a
// rename only ever replaces a regular file (or makes a new one).
struct WriteTarget {
  std::filesystem::path path;  // the path with its symbolic links followed
  // true: a regular or new file, written to path + ".tmp-PID" and renamed
  // over path. false: a device, a FIFO or a socket, or a file a process has
  // open (/dev/stdout, /dev/fd/N, /proc/self/fd/N), written where it stands
  // and appended to, never truncated or replaced.
  bool replace = true;
};

// Resolves `file` and checks, before any work is done, that it can be
// written: a directory, a missing folder, a folder where no file can be
// created, and a regular file of /proc or /sys are refused with ts::Error
// (one line naming `file` and the reason).
WriteTarget check_write_target(const std::filesystem::path& file);

// Throws ts::Error with one line naming the file and the reason (an empty
// path, a directory, a missing folder, no permission, a full disk, not a
// regular file); the file is then as it was before, and no temporary file
// is left behind. A symbolic link is written through (check_write_target).
// A device, FIFO or open file (/dev/stdout) is appended to where it stands
// when in_place_ok, and refused otherwise.
void write_file_atomically(const std::filesystem::path& file, std::string_view bytes,
                           bool in_place_ok = false);

}  // namespace ts
