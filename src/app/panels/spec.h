#pragma once
// Speculative decoding: the viewed step's round of a speculative lane, as the
// session recorded it (SpecRound). The draft tokens in a row with their
// verdicts, p (target) and q (draft) side by side as bars, p/q and u on a
// sampled lane, the residual distribution at the rejection, gamma planned /
// drafted / next, the KV lengths and released slots of both models, the
// draft passes' cost beside the verify pass's, and the lane's running
// acceptance rate and tokens per target pass. A presenter can reveal the
// round one draft token at a time before its verdict.
#include <string>
#include <vector>

#include "app/panels/panel.h"
#include "sampling/speculative.h"

namespace ts::app {

// The lane's rounds up to and including a history step.
struct SpecTotals {
  int rounds = 0;     // target passes (one verify pass per round)
  int drafted = 0;    // sum of gamma
  int accepted = 0;   // sum of accepted drafts
  int committed = 0;  // tokens the rounds added to the lane
  double acceptance() const { return drafted > 0 ? static_cast<double>(accepted) / drafted : 0; }
  double tokens_per_pass() const {
    return rounds > 0 ? static_cast<double>(committed) / rounds : 0;
  }
};
SpecTotals spec_totals(const SessionSnapshot& snap, int lane, int up_to_step);

// What the panel shows, built from the record each frame (tests read it).
struct SpecPanelView {
  bool has_round = false;
  std::string message;  // the one line shown instead when there is no round
  int gamma_planned = 0, gamma = 0, gamma_next = 0;
  std::string clamp_reason;
  bool sampled = false;
  struct Row {
    int token = -1;
    std::string piece;  // token_piece: escaped, banned words masked
    float p = 0, q = 0;
    double ratio = 0, uniform = 0;
    int target_choice = -1;
    std::string verdict;  // "accepted", "rejected", "not checked"
  };
  std::vector<Row> rows;  // the revealed drafts only
  int revealed = 0;       // drafts shown (the stepper's k; gamma when showing all)
  bool verdict_shown = false;
  int accepted = 0;
  int next_token = -1;
  std::string next_piece;
  std::string next_kind;  // "bonus" or "correction"
  double next_uniform = 0;
  // The residual's largest entries (sampled rejection), largest first.
  std::vector<std::pair<int, float>> residual_top;
  bool residual_fallback = false;
  SpecTotals totals;
  // Drawing: the width of the q and p bars (0: no room for bars, the values
  // only) and the table cells whose text ran past their column last frame.
  float bar_width = 0;
  int clipped_cells = 0;
};

class SpeculativePanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text

  // The stepper: -1 shows the whole round; k in 0..gamma shows the first k
  // drafts with their verdicts, and gamma + 1 adds the round's verdict.
  int substep() const { return substep_; }
  void set_substep(int k) { substep_ = k; }
  const SpecPanelView& view() const { return view_; }

 private:
  void build_view(const PanelContext& ctx);
  void draw_round(PanelContext& ctx);

  SpecPanelView view_;
  int substep_ = -1;
  const void* round_key_ = nullptr;  // the record shown: a new round restarts the stepper
};

}  // namespace ts::app
