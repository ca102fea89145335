#pragma once
// Timeline: prefill and every decode step with its measured wall time and
// analytic FLOPs, bytes moved and FLOPs per byte, on the backend that ran it.
// Charts take extra series (a cache-off run could be overlaid the same way).
// Steps with lookahead or prompt-lookup passes add a chart of the tokens the
// passes committed beside the rows they fed.
#include <string>

#include "app/panels/panel.h"

namespace ts::app {

// One step's bar in the wall-time, FLOPs and bytes charts. A step in which
// speculative lanes ran rounds is split into the rounds' draft passes, their
// verify passes (each figure from the rounds' records) and the rest (the
// other lanes' shared forward: the step's total less the rounds'); any other
// step is one segment, the step's own figures.
struct TimelineBar {
  int rounds = 0;     // speculative rounds in the step (0: one segment)
  int drafted = 0;    // γ drafted, summed over the rounds
  int committed = 0;  // tokens the rounds committed
  double rest_seconds = 0, draft_seconds = 0, verify_seconds = 0;
  StepCost rest_cost, draft_cost, verify_cost;
  // Lookahead and prompt-lookup lanes' passes in the step: the tokens they
  // committed and the rows they fed (a pass's cost grows with its rows).
  int passes = 0;
  int pass_committed = 0;
  int pass_fed = 0;
};
TimelineBar timeline_bar(const StepTrace& t);
// The bar's tooltip line for a speculative step ("draft 1.2 ms + verify
// 3.4 ms · γ 4 drafted, 3 committed ..."); empty for other steps.
std::string timeline_note(const TimelineBar& b);
// What a step's lookahead or prompt-lookup passes gave for their cost
// ("3 tok / 17 fed"); empty for a step without such a pass.
std::string timeline_pass_note(const TimelineBar& b);

class TimelinePanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text
  // The wall-time chart's series the last frame drew: one, or with
  // speculative steps three stacked (the rest, draft passes, verify pass).
  const std::vector<ChartSeries>& wall_series() const { return last_wall_; }
  // The passes chart the last frame drew (tokens committed, rows fed per
  // step); empty when no step had a lookahead or prompt-lookup pass.
  const std::vector<ChartSeries>& pass_series() const { return last_passes_; }
  // Each step's tooltip line the last frame gave the charts.
  const std::vector<std::string>& notes() const { return last_notes_; }

 private:
  void draw_table(PanelContext& ctx, float height);
  int last_rows_ = 0;        // scroll to the newest row when a step is added
  bool show_table_ = false;  // the numbers of every step instead of the charts
  std::vector<ChartSeries> last_wall_;
  std::vector<ChartSeries> last_passes_;
  std::vector<std::string> last_notes_;
};

}  // namespace ts::app
