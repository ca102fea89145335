#pragma once
// Logit lens: for the viewed step, the top-5 next-token predictions read off
// the residual stream after every layer (final layer norm, then the tied
// unembedding), as a layers x top-5 table; the last row is the model's own
// output. Computed on the worker, once per step and lane.
#include <string>

#include "app/panels/panel.h"
#include "sampling/dola.h"

namespace ts::app {

class LogitLensPanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text
};

// A DoLa lane's record adds a column: for each of its candidate layers the
// divergence DoLa measured from the final layer ("JS 1.746"), the premature
// layer it chose marked ("JS 1.746 ◀ premature"); "" for other layers.
std::string dola_lens_cell(const DolaStep& d, int layer);

}  // namespace ts::app
