#pragma once
// Choosing the next token: the strategy's controls (every parameter and the
// seed; a change re-chooses the newest step's token from the same logits),
// the pipeline's stages as bars with removed tokens greyed out, and the draw
// as a cumulative strip with the uniform number u marked (greedy: the argmax).
#include <optional>
#include <string>
#include <vector>

#include "app/panel.h"
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

 private:
  void draw_controls(PanelContext& ctx);
  // A beam lane's step: the ranked candidates and what became of each.
  void draw_beam_step(PanelContext& ctx, const BeamStep& step);
  void draw_stages(PanelContext& ctx, float height);
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
};

// "top-p 0.9" style label of a stage as this strategy configures it.
std::string stage_label(const StageRecord& stage, const SamplingParams& params);

// "banned words: 15 tokens removed" and, for the hover, the removed tokens
// most likely first (at most `max_listed`, then how many more).
std::string banned_words_summary(const StageRecord& stage);
std::string banned_words_removed_list(const SessionSnapshot& snap, const StageRecord& stage,
                                      const std::vector<float>& probs, int max_listed);

}  // namespace ts::app
