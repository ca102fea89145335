#pragma once
// Choosing the next token: the strategy's controls (every parameter and the
// seed; a change re-chooses the newest step's token from the same logits),
// the pipeline's stages as bars with removed tokens greyed out, and the draw
// as a cumulative strip with the uniform number u marked (greedy: the argmax).
#include <optional>
#include <string>
#include <vector>

#include "app/panels/panel.h"
#include "sampling/sampling_pipeline.h"

namespace ts::app {

class SamplingPanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text
  // The record on show (tests).
  const std::optional<SamplingRecord>& record() const { return rec_; }
  // The line that says what chose the token, as last drawn (tests).
  const std::string& headline() const { return headline_; }
  // Contrastive lanes: the alpha the candidate table re-ranks with (it
  // starts at the lane's own for each step shown), and the candidate that
  // wins under it, as last drawn: both from the recorded p and penalties,
  // nothing is recomputed.
  float contrastive_alpha() const { return alpha_view_; }
  void set_contrastive_alpha(float alpha) { alpha_view_ = alpha; }
  int contrastive_winner() const { return alpha_winner_; }
  const std::vector<float>& contrastive_scores() const { return alpha_scores_; }
  // The layout as last drawn (tests): how many candidate rows of the stage
  // table were wholly in view, and whether the controls were folded into
  // their one-line header for want of room.
  static constexpr int kMinTableRows = 5;
  int visible_rows() const { return visible_rows_; }
  // How the stage table fitted its panel when last drawn: bars beside the
  // numbers, the numbers alone, or columns at their own widths that scroll
  // sideways; and how many of its cells were cut at their right edge (tests).
  enum class StageTableLayout { kBars, kNumbers, kScrolled };
  StageTableLayout stage_table_layout() const { return table_layout_; }
  int clipped_cells() const { return clipped_cells_; }
  bool controls_folded() const { return fold_controls_; }

 private:
  void draw_controls(PanelContext& ctx);
  // A beam lane's step: the ranked candidates and what became of each.
  void draw_beam_step(PanelContext& ctx, const BeamStep& step);
  // A contrastive lane's step: the candidates' p, penalty, most similar
  // earlier token and score, a bar pair each, the alpha slider, and the
  // similarity strip of the hovered candidate over the context.
  void draw_contrastive_step(PanelContext& ctx, const LaneStep& record);
  // The headline and the stage table, leaving `below` pixels for the strip
  // (these two in sampling_stages.cpp).
  void draw_stages(PanelContext& ctx, float below);
  void draw_strip(PanelContext& ctx);
  void update(PanelContext& ctx);
  // The "Ban listed words" checkbox and what the stage removed at the viewed step.
  void draw_banned_words(PanelContext& ctx);

  std::optional<SamplingRecord> rec_;
  std::string rec_error_;
  std::vector<std::vector<float>> stage_probs_;  // softmax of each stage's logits
  std::vector<int> candidates_;
  const StepTrace* rec_trace_ = nullptr;
  int rec_lane_ = -1;
  StepTracePtr kept_;
  std::string headline_;
  const ContrastiveStep* alpha_step_ = nullptr;  // the step alpha_view_ was reset for
  float alpha_view_ = 0;
  int alpha_winner_ = -1;
  std::vector<float> alpha_scores_;
  int hovered_candidate_ = -1;
  int visible_rows_ = 0;
  StageTableLayout table_layout_ = StageTableLayout::kBars;
  int clipped_cells_ = 0;
  float controls_lines_ = 0;        // the controls' height as last drawn unfolded, in font sizes
  bool fold_controls_ = false;      // too short for controls and table: controls behind a header
  bool controls_unfolded_ = false;  // the header opened by a click
  bool compact_strip_ = false;      // too short for the strip: its line of text only
};

// "top-p 0.9" style label of a stage as this strategy configures it.
std::string stage_label(const StageRecord& stage, const SamplingParams& params);

// "banned words: 15 tokens removed" and, for the hover, the removed tokens
// most likely first (at most `max_listed`, then how many more).
std::string banned_words_summary(const StageRecord& stage);
std::string banned_words_removed_list(const SessionSnapshot& snap, const StageRecord& stage,
                                      const std::vector<float>& probs, int max_listed);

}  // namespace ts::app
