#pragma once
// The attention a panel shows, assembled from the steps of one lane: after
// prefill the full causal T x T (every prompt row from the one parallel pass);
// each decode step then appends its one query row. Cells above the diagonal
// are kMaskedValue. No GL, no ImGui.
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "session/session_worker.h"

namespace ts::app {

using AttentionLayer = std::shared_ptr<const std::vector<float>>;  // [head][rows][context]

// Where one step's attention comes from: the trace when it kept the layer,
// otherwise a recomputation on the session's worker (asynchronous: get()
// returns null until it is ready; ask again on a later frame).
class AttentionSource {
 public:
  virtual ~AttentionSource() = default;
  virtual AttentionLayer get(const SessionSnapshot& snap, int step, int lane, int layer) = 0;
};

// The trace's own data, then SessionWorker::attention.
class WorkerAttentionSource : public AttentionSource {
 public:
  explicit WorkerAttentionSource(SessionWorker* worker) : worker_(worker) {}
  AttentionLayer get(const SessionSnapshot& snap, int step, int lane, int layer) override;

 private:
  SessionWorker* worker_;
  // Recomputed layers, keyed by the trace they belong to (traces are
  // immutable; holding the trace keeps its address from being reused).
  struct Entry {
    StepTracePtr trace;
    AttentionLayer data;
  };
  std::map<std::tuple<const StepTrace*, int, int>, Entry> recomputed_;
};

// A speculative round's verify-pass rows: the lane's pending token, then
// the drafts the target accepted, rejected, or never checked (after the
// first rejection).
enum class VerifyRowRole { kPending, kAccepted, kRejected, kUnchecked };

struct AttentionMatrix {
  int n = 0;                  // rows = columns = positions 0..n-1
  std::vector<float> values;  // n x n, row-major: values[query * n + key]
  std::vector<int> tokens;    // token at each position
  int prompt_len = 0;
  int first_new_row = 0;  // rows the viewed step computed: [first_new_row, n)
  bool complete = false;  // false while some step's attention is being recomputed
  // A speculative round viewed: its verify pass computed the rows
  // [first_new_row, first_new_row + verify_rows) (γ + 1 of them over the
  // cached prefix), row_roles[i] says what row first_new_row + i holds, and
  // the lane kept the first kept_rows of them. 0 / empty for other steps.
  int verify_rows = 0;
  int kept_rows = 0;
  std::vector<VerifyRowRole> row_roles;
  // A lookahead or prompt-lookup pass viewed: its fed rows are the rows
  // [first_new_row, first_new_row + pass_rows) (the last token, candidates,
  // window), and pass_mask (pass_rows x pass_rows, row-major) says which fed
  // rows each may attend to; every fed row sees the cached positions before
  // them. 0 / empty for other steps.
  int pass_rows = 0;
  std::vector<uint8_t> pass_mask;
  // False where the pass's mask keeps query from key (both fed rows).
  bool pass_allows(int query, int key) const {
    const int q = query - first_new_row, k = key - first_new_row;
    if (pass_rows <= 0 || q < 0 || k < 0 || q >= pass_rows || k >= pass_rows) return true;
    return pass_mask[static_cast<size_t>(q) * pass_rows + k] != 0;
  }
  float at(int query, int key) const { return values[static_cast<size_t>(query) * n + key]; }
};

// One layer of one lane up to and including `step`; head < 0 averages the heads.
AttentionMatrix build_attention_matrix(const SessionSnapshot& snap, int step, int lane, int layer,
                                       int head, AttentionSource& source);

// Every layer x head (plus the average over heads, last column) as small
// tiles in one atlas, for the thumbnail grid. Tiles larger than max_tile
// cells are max-pooled (the strongest weight in each block survives).
struct ThumbnailAtlas {
  int layers = 0;
  int heads = 0;  // tile columns = heads + 1 (the average)
  int tile = 0;   // cells per tile side
  int gap = 1;    // background cells between tiles
  int cols = 0, rows = 0;
  std::vector<float> values;  // rows x cols; kBackgroundValue in the gaps
  bool complete = false;
  // Top-left cell of a tile (column heads = the average).
  int tile_x(int head_col) const { return head_col * (tile + gap); }
  int tile_y(int layer) const { return layer * (tile + gap); }
};

ThumbnailAtlas build_thumbnail_atlas(const SessionSnapshot& snap, int step, int lane,
                                     AttentionSource& source, int max_tile = 32);

// Synthetic causal attention (for the frame-time benchmark): n x n, each row a
// softmax over a few peaks, deterministic.
AttentionMatrix synthetic_attention(int n);

}  // namespace ts::app
