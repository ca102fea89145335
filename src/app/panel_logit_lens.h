#pragma once
// Logit lens: for the viewed step, the top-5 next-token predictions read off
// the residual stream after every layer (final layer norm, then the tied
// unembedding), as a layers x top-5 table; the last row is the model's own
// output. Computed on the worker, once per step and lane.
#include "app/panel.h"

namespace ts::app {

class LogitLensPanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text
};

}  // namespace ts::app
