#pragma once
// Logits: the top-N next-token candidates as bars (probability, logit or
// log-probability), the entropy, and every token of the vocabulary ranked in
// one small plot.
#include <string>
#include <vector>

#include "app/panels/panel.h"

namespace ts::app {

// The numbers of one step's logits the panels show (computed once per step).
struct LogitsView {
  const StepTrace* trace = nullptr;  // what it was computed from
  int lane = -1;
  std::vector<int> ranked;      // every token id, most likely first
  std::vector<float> probs;     // softmax
  std::vector<float> logprobs;  // log-softmax
  double entropy = 0;           // nats
};
void compute_logits_view(const LaneStep& record, LogitsView& out);

class LogitsPanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text
  // The line naming the token whose successor is scored, as last drawn (tests).
  const std::string& heading() const { return heading_; }

 private:
  void draw_bars(PanelContext& ctx, float height);
  void draw_vocab_plot(PanelContext& ctx, ImVec2 size);
  LogitsView lv_;
  StepTracePtr kept_;  // keeps lv_.trace's address from being reused
  std::string heading_;
};

}  // namespace ts::app
