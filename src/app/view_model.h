#pragma once
// What the panels look at, derived from one immutable SessionSnapshot: the
// viewed step and lane, the tokens up to it, and formatting shared by the
// panels. No GL, no ImGui.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "app/render/colormap.h"
#include "session/session_worker.h"

namespace ts::app {

// The lane's own record in a step (null when the lane did not take part).
const LaneStep* find_lane_step(const StepTrace& trace, int lane);
// The record describing `lane` at history step `step` (ts::lane_record over
// the snapshot: a branched lane falls back to its parent). Null when none.
const LaneStep* lane_record(const SessionSnapshot& snap, int step, int lane);

// True when `record` is a branch: a token the user chose in place of what
// the lane's strategy chose (the record a branched lane starts from).
bool is_branch_record(const SessionSnapshot& snap, const LaneStep* record);

struct StepView {
  int step = -1;  // history index being shown; -1 before prefill
  int lane = 0;
  const StepTrace* trace = nullptr;
  const LaneStep* record = nullptr;  // this lane's record at `step`
  std::vector<int> tokens;           // prompt, then the tokens chosen up to and including `step`
  int prompt_len = 0;
  int cached = 0;         // positions in the KV cache after the step (fed through the model)
  bool latest = true;     // `step` is the newest step of the history
  bool branched = false;  // the record's token was chosen by the user (a branch)
};

// wanted_step < 0 follows the newest step. A lane that stopped earlier is
// shown at its own last step.
StepView make_step_view(const SessionSnapshot& snap, int wanted_step, int lane);

// Visible piece of a token (spaces, newlines and partial UTF-8 made visible).
// While the banned-words stage is on, a token that is a listed word by itself
// is shown masked (mask_banned_piece): the model's rankings may still list it.
std::string token_piece(const SessionSnapshot& snap, int id);
// The same, never masked: for the tokens of the context (what the user typed
// is shown as typed).
std::string context_piece(const SessionSnapshot& snap, int id);

// Running text for reading, with whitespace at its start and end made
// visible (␣ ↵ →): a prompt of spaces is not an empty line.
std::string visible_edges(std::string_view text);

// Bytes held (the KV cache, weights, a file): binary units as the CLI
// prints them, "812 B", "32.0 KiB", "474.7 MiB", "5.80 GiB".
std::string format_bytes(double bytes);
// Bytes a step moves (memory traffic): decimal units, as the CLI's "MB
// moved" and as bandwidth is quoted (GB/s): "21.1 MB".
std::string format_bytes_moved(double bytes);
std::string format_flops(double flops);                        // "1.23 GFLOP"
std::string format_seconds(double seconds);                    // "12.3 ms"
std::string format_rate(double per_second, const char* unit);  // "3.1 G" + unit + "/s"
std::string format_count(int64_t n);                           // "124,439,808"
std::string format_percent(double p);  // probability as "42.1%", "0.37%", "0.012%", "<0.001%"

// The KV cache's block tables as the KV cache panel and its SVG export draw
// them: the sequences holding blocks, the blocks every one of them starts
// with (the prompt's, after a fork; drawn once, not once per sequence) and
// the longest row of blocks that gives (the shared row or one sequence's
// own blocks after it).
struct KvBlockRows {
  std::vector<const SequenceOccupancy*> seqs;  // those with blocks, in the cache's order
  size_t shared = 0;                           // 0 with a single sequence
  size_t most_blocks = 0;
};
KvBlockRows kv_block_rows(const KvOccupancy& kv);
// Which lane (and beam) held cache sequence `id` after the step `trace`,
// from its record (live or re-opened); the draft model's sequences, and a
// record without owners, from the lanes as they are now. Empty when no lane
// holds it.
std::string kv_sequence_owner(const SessionSnapshot& snap, const StepTrace* trace, SeqId id,
                              bool draft);
// Physical slots the step `view` shows wrote, for every lane.
std::set<int> written_slots(const StepView& view);

// A tick under the attention colour legend: the weight, its label and where
// it sits along the legend (0 to 1, heat_position).
struct LegendTick {
  float value;
  const char* label;
  float position;
};
std::vector<LegendTick> legend_ticks(const HeatRange& range);

// The KV cache on/off comparison's wall times, one per step of each run
// (step 0 the prefill, the same work both ways): whether one step far slower
// than its run's others (a busy machine) decides which run is faster. Each
// decode step is held to at most kOutlierFactor times its run's median decode
// step and the prefill to the faster run's prefill; when the totals then order
// the other way, returns that step (the one that reversed them), else -1.
inline constexpr double kOutlierFactor = 4.0;
int timing_outlier_reversing(const std::vector<double>& on_seconds,
                             const std::vector<double>& off_seconds);

}  // namespace ts::app
