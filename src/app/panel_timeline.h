#pragma once
// Timeline: prefill and every decode step with its measured wall time and
// analytic FLOPs, bytes moved and FLOPs per byte, on the backend that ran it.
// Charts take extra series (a cache-off run could be overlaid the same way).
#include "app/panel.h"

namespace ts::app {

class TimelinePanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text

 private:
  void draw_table(PanelContext& ctx, float height);
  int last_rows_ = 0;        // scroll to the newest row when a step is added
  bool show_table_ = false;  // the numbers of every step instead of the charts
};

}  // namespace ts::app
