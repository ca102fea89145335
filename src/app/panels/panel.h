#pragma once
// What every panel gets each frame, and the window frame around it.
#include <imgui.h>

#include "app/app_state.h"
#include "app/controller.h"
#include "app/layout.h"
#include "app/ui_util.h"
#include "app/view_model.h"

namespace ts::app {

struct PanelContext;

// A window panel. Each is declared once, by a row in panel_list.h.
class Panel {
 public:
  virtual ~Panel() = default;
  virtual void draw(PanelContext& ctx) = 0;
};

struct PanelContext {
  AppState& state;
  Controller& ctl;
  const SessionSnapshot* snap;  // null while no model is loaded
  const StepView& view;
  FrameRecord& record;
  const LayoutPlan& layout;
  const Palette& pal;
  float scale;  // 1, or larger in presentation mode (for our own lines and sizes)
  ImFont* heading_font = nullptr;  // one size up, for the one line a class must read
};

// Begins the panel's window (placed by the layout plan) and records that it
// was drawn. Returns false when it is closed or collapsed; call end_panel()
// whenever begin_panel() was called with the window open.
bool begin_panel(PanelContext& ctx, PanelId id, ImGuiWindowFlags flags = 0);
void end_panel();

// The panel's "?" help at the end of the current line.
void panel_help_button(PanelId id);

// Branches a new lane from the viewed lane at the viewed step with `token`
// chosen there (a click on a candidate in the Logits or Sampling panel); the
// new lane becomes the viewed lane once it exists.
void branch_with_token(PanelContext& ctx, int token);
// Why the viewed lane cannot branch at the viewed step (a beam-search or a
// closed lane, no step yet), or null when a click would branch.
const char* branch_refusal(const SessionSnapshot* snap, const StepView& view);
// The tooltip line for a candidate token: "chosen by ...", the branch hint,
// or why a click does nothing here.
const char* candidate_hint(const SessionSnapshot* snap, const StepView& view, int token);
// The tooltip line that says a click branches.
inline constexpr const char* kBranchHint = "click: branch a new lane with this token here";

// Shown by panels when there is nothing to draw yet.
void empty_hint(const PanelContext& ctx, const char* what);

}  // namespace ts::app
