#pragma once
// The Choosing panel's DoLa section (a DoLa lane's record): each candidate
// layer's divergence from the final layer as a bar, the premature layer
// marked, and the tokens the relative-top filter kept with log p at the
// final and at the premature layer and their contrast, showing which
// tokens the contrast promotes over the final layer's own ranking. Every
// number is the record's (sampling/dola.h); nothing is recomputed.
#include <string>
#include <vector>

#include "app/panels/panel.h"
#include "trace/step_trace.h"

namespace ts::app {

// What the section shows for one record, as text and numbers (the draw and
// the tests use the same).
struct DolaViewModel {
  std::string headline;  // "DoLa: layer 2 contrasted with the final layer → “ the”"
  struct Layer {
    int layer = 0;
    float divergence = 0;  // 0 with a single candidate (nothing compared)
    bool premature = false;
  };
  std::vector<Layer> layers;
  struct Row {
    int token = -1;
    std::string piece;
    float final_logp = 0, premature_logp = 0, contrast = 0;
    int final_rank = 0;     // 0 = the final layer's favourite
    int contrast_rank = 0;  // its place by contrast
    bool promoted = false;  // ranked higher by contrast than by the final layer
    bool chosen = false;
  };
  std::vector<Row> rows;  // highest contrast first
  int kept = 0;
};

DolaViewModel dola_view_model(const SessionSnapshot& snap, const LaneStep& record);

// Draws the section into the current window at most `height` pixels tall;
// the Choosing panel's stages (run on the contrast scores) follow it.
void draw_dola_view(PanelContext& ctx, const LaneStep& record, float height);

// The model of the section as last drawn (tests).
const DolaViewModel& last_dola_view();

// The section's help: what DoLa does, and HF's caveat about small models.
extern const char* const kDolaHelp;

}  // namespace ts::app
