#pragma once
// Attention: the chosen layer and head as a heatmap (query rows x key
// columns, causal mask hatched, the rows the viewed step computed outlined),
// the colour legend, hover details, and a layers x heads grid of thumbnails
// (plus the average over heads) to pick from.
#include <cstdint>
#include <memory>

#include "app/attention_data.h"
#include "app/panels/panel.h"
#include "app/render/heatmap.h"

namespace ts::app {

// The line naming a speculative round's verify pass ("verify pass: γ+1 =
// 5 rows over the 12 cached positions · 2 accepted, 2 rejected"); empty
// when the matrix is not a round's.
std::string verify_caption(const AttentionMatrix& m);

// Grouped-query attention: query head h reads KV head h / (n_head / kv_heads).
// The one-line note ("8 query heads share 2 KV heads: 4 per group") and a
// head's group ("KV head 0: q heads 0-3"); both empty when every query head
// has its own KV head (GPT-2, multi-head attention).
std::string gqa_note(const ModelConfig& cfg);
std::string kv_group_label(const ModelConfig& cfg, int head);

class AttentionPanel : public Panel {
 public:
  // renderer may be null (shaders missing): the panel then says so.
  void set_renderer(HeatmapRenderer* renderer) { renderer_ = renderer; }
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text

  // What is on screen, for tests and the benchmark.
  const AttentionMatrix& matrix() const { return matrix_; }
  const HeatmapImage& image() const { return image_; }
  const HeatmapStyle& style() const { return style_; }
  // Where the last frame drew the heatmap and the outline of the rows the
  // viewed step added (w = 0: no outline), in window coordinates.
  const PanelBox& heatmap_box() const { return heatmap_box_; }
  const PanelBox& new_rows_box() const { return new_rows_box_; }
  // A speculative round viewed: the caption drawn over the frame of its
  // verify rows (empty otherwise).
  const std::string& verify_caption_text() const { return verify_caption_; }
  // A lookahead or prompt-lookup pass viewed: the cells among its fed rows
  // that the pass's mask forbids (under the causal diagonal), greyed over by
  // the last frame (0 otherwise).
  int pass_masked_cells() const { return pass_masked_cells_; }
  // The ticks the last frame drew under the colour legend (those with room
  // for their label), each at its position along the legend.
  const std::vector<LegendTick>& legend_ticks_drawn() const { return legend_ticks_drawn_; }
  // True when every attention row the view needs has arrived.
  // Under GQA: the note and the viewed head's group as the last frame drew
  // them, and the group separators drawn in the all-heads grid (all empty /
  // 0 for multi-head attention).
  const std::string& gqa_note_drawn() const { return gqa_note_drawn_; }
  const std::string& group_label_drawn() const { return group_label_drawn_; }
  int group_separators_drawn() const { return group_separators_drawn_; }
  bool settled() const { return matrix_.complete && (atlas_.complete || atlas_.layers == 0); }
  // Benchmark: show this matrix instead of the session's; rerender_every_frame
  // re-uploads and re-colours it each frame (the cost when data changes).
  void set_synthetic(AttentionMatrix m, bool rerender_every_frame);

 private:
  void update_matrix(PanelContext& ctx);
  void draw_controls(PanelContext& ctx);
  void draw_heatmap(PanelContext& ctx, float side, float label_w);
  void draw_legend(PanelContext& ctx, float width);
  void draw_summary(PanelContext& ctx, float width);
  void draw_thumbnails(PanelContext& ctx, ImVec2 area);
  std::string label(const PanelContext& ctx, int pos) const;
  VerifyRowRole row_role(int row) const;                 // kPending outside a round's rows
  static const char* row_role_text(VerifyRowRole role);  // its tooltip, or null

  HeatmapRenderer* renderer_ = nullptr;
  std::unique_ptr<WorkerAttentionSource> source_;
  const SessionWorker* source_worker_ = nullptr;

  AttentionMatrix matrix_;
  uint64_t matrix_key_ = 0;
  uint64_t matrix_serial_ = 0;  // grows with every rebuilt matrix
  ThumbnailAtlas atlas_;
  uint64_t atlas_key_ = 0;
  uint64_t atlas_serial_ = 0;

  HeatmapStyle style_;
  HeatmapImage image_, thumbs_, legend_, mask_swatch_;
  std::vector<LegendTick> legend_ticks_drawn_;
  uint64_t image_key_ = 0, thumbs_key_ = 0, legend_key_ = 0, swatch_key_ = 0;

  PanelBox heatmap_box_, new_rows_box_;
  std::string verify_caption_;
  int pass_masked_cells_ = 0;
  std::string gqa_note_drawn_, group_label_drawn_;
  int group_separators_drawn_ = 0;
  bool synthetic_ = false;
  bool rerender_every_frame_ = false;
};

}  // namespace ts::app
