#pragma once
// Reading a session file back (the "tokenscope-session/2" JSON that the
// window's Export session and `tokenscope-cli --json` write) into the same
// records a live session publishes: prompt, lanes, every StepTrace with its
// logits, attention, sampling parameters, beam and contrastive steps, KV
// occupancy and cost, and a tokenizer holding the model's vocabulary (for
// showing tokens; it has no merges, so it cannot encode text). No model and
// no engine are involved.
//
// Precision: logits are stored as float32 (exact, so the sampling stages
// recomputed from them are the live ones). Attention weights are stored as
// IEEE half floats: relative error at most 2^-11 (absolute 2^-25 below
// 2^-14), far below one step of the 256-entry colour map in the linear
// scale (1/255) and of the log scale's decades; an 8-bit code would lose
// the small weights the log scale exists to show, float32 would double the
// file for nothing a view can show.
//
// Every failure is a ts::Error with one line, "FILE: reason". Sizes are
// bounded before anything is allocated from them: the file (kMaxSessionFileBytes),
// the number of JSON values and the nesting depth while parsing, the
// model's shape, the context, the lanes and the steps; a packed array must
// hold exactly the values its record's shape says.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "session/session_worker.h"

namespace ts {

inline constexpr uint64_t kMaxSessionFileBytes = uint64_t(1) << 30;  // 1 GiB
inline constexpr int64_t kMaxSessionJsonValues = int64_t(1) << 24;
inline constexpr int kMaxSessionJsonDepth = 32;
inline constexpr int kMaxReplayContext = 1 << 15;  // positions per sequence
inline constexpr int kMaxReplayLanes = 256;        // lanes ever made (closed ones stay)
inline constexpr int kMaxReplayLayers = 256;
inline constexpr int kMaxReplayHeads = 256;

struct ImportedSession {
  std::string file;  // the name errors and the window use
  // Everything as at the end of the recorded session: the whole history,
  // the lanes (with branch records), the last KV occupancy. busy/running
  // are false; memory is empty (nothing of the model is held).
  SessionSnapshot full;
};

// The session as it was after history step `cursor` (-1: before prefill,
// the prompt only), for stepping through it: the history up to the cursor,
// each lane's tokens and stop reason as of that step, the KV occupancy after
// it. At the last step it is `full` itself. `version` goes into the snapshot.
SnapshotPtr replay_snapshot(const ImportedSession& session, int cursor, uint64_t version);

// Throws ts::Error "FILE: reason" (not a regular file, too large, not JSON,
// another format version, a missing or malformed field, inconsistent sizes).
ImportedSession import_session_file(const std::filesystem::path& file);
// The same from the file's text; `name` stands for the file in messages.
ImportedSession import_session_text(std::string_view text, const std::string& name);

}  // namespace ts
