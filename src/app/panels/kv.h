#pragma once
// KV cache: tokens, bytes and blocks used / shared / free; each lane's block
// table as a row of blocks with their slots (the slots the viewed step wrote
// highlighted); the physical block pool; and the cache size over the steps.
// With a draft model (speculative lanes) the draft's own cache follows as a
// second section, and the slots a viewed round wrote and then gave back (the
// rejected drafts') are marked freed in both.
#include <set>
#include <string>
#include <vector>

#include "app/panels/panel.h"

namespace ts::app {

// What the panel shows about speculative decoding for the viewed step, all
// from the step's round records and the snapshot's caches.
struct KvSpecView {
  bool has_draft = false;  // the session has a draft model: its section is shown
  int draft_blocks_used = 0, draft_blocks_total = 0;  // the draft's pool now
  bool round = false;                           // the viewed lane's record is a speculative round
  int target_released = 0, draft_released = 0;  // that round's released slots
  int target_blocks_freed = 0, draft_blocks_freed = 0;
  std::string round_line;  // "round gave back N target slots, M draft slots ..."
  // Slots the step's rounds gave back and nothing in the step wrote again,
  // and the slots the step wrote that its lanes kept.
  std::set<int> target_freed_slots, draft_freed_slots, written_slots;
};
KvSpecView kv_spec_view(const SessionSnapshot& snap, const StepView& v);

// What one token costs in a model's KV cache: K and V, each kv_heads x
// head_dim values in the cache's format, in every layer. The value size is
// the cache's own (its capacity over its slots), so --kv f16 shows 2 bytes.
struct KvTokenBytes {
  int64_t per_layer = 0;  // 2 x kv_heads x head_dim x bytes per value
  int64_t per_token = 0;  // per_layer x n_layer
  std::string text;       // "who: 2 (K, V) x 2 KV heads x 5 dims x 4 B = 80 B per layer ..."
};
KvTokenBytes kv_token_bytes(const char* who, const ModelConfig& cfg, const KvOccupancy& kv);
// The same from the bytes of one token's K and V in one layer.
KvTokenBytes kv_token_bytes(const char* who, const ModelConfig& cfg, int64_t per_layer);
// Those bytes as the cache `kv` stores them (f32 before it has a pool).
int64_t kv_layer_token_bytes(const ModelConfig& cfg, const KvOccupancy& kv);

class KvCachePanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text

  // What the last frame drew in the draft model's section: its distinct
  // physical blocks (-1: no section), and the freed slots marked in both.
  int draft_blocks_drawn() const { return draft_blocks_drawn_; }
  int freed_slots_drawn() const { return freed_slots_drawn_; }
  // With the KV cache off: what the last frame said instead of the blocks
  // (empty with the cache on).
  const std::string& cache_off_text() const { return cache_off_text_; }
  // The name of each sequence the last frame drew a row of blocks for.
  const std::vector<std::string>& sequence_labels() const { return sequence_labels_; }
  // The blocks of the target model's "shared by all" row as last drawn
  // (0: no such row).
  size_t shared_blocks_drawn() const { return shared_blocks_drawn_; }
  // The bytes-per-token lines the last frame drew: the model's, then the
  // draft model's when there is one, then the model the Compare panel loaded
  // beside it when it compares two models.
  const std::vector<KvTokenBytes>& token_bytes_drawn() const { return token_bytes_; }

 private:
  struct Grid {
    const KvOccupancy* kv = nullptr;
    const std::set<int>* written = nullptr;
    const std::set<int>* freed = nullptr;
    bool draft = false;  // owners are lanes' draft sequences
  };
  void draw_legend(PanelContext& ctx, bool freed);
  void draw_lane_blocks(PanelContext& ctx, const Grid& g);
  void draw_pool(PanelContext& ctx, const Grid& g, float height, const char* title);
  void draw_chart(PanelContext& ctx, float height);
  int draft_blocks_drawn_ = -1;
  int freed_slots_drawn_ = 0;
  std::string cache_off_text_;
  std::vector<std::string> sequence_labels_;
  size_t shared_blocks_drawn_ = 0;
  std::vector<KvTokenBytes> token_bytes_;
  std::set<int> drawn_blocks_;  // per grid while drawing
};

}  // namespace ts::app
