#include "app/panel.h"

#include "app/help_text.h"

namespace ts::app {

bool begin_panel(PanelContext& ctx, PanelId id, ImGuiWindowFlags flags) {
  const int index = static_cast<int>(id);
  bool& open = ctx.state.settings.open[index];
  if (!open) return false;
  const PanelRect& r = ctx.layout.rects[index];
  if (r.set) {
    const ImGuiCond cond = ctx.layout.force ? ImGuiCond_Always : ImGuiCond_FirstUseEver;
    ImGui::SetNextWindowPos(r.pos, cond);
    ImGui::SetNextWindowSize(r.size, cond);
  }
  const bool visible = ImGui::Begin(panel_title(id), &open, flags);
  if (!visible) {
    ImGui::End();
    return false;
  }
  ctx.record.mark(id);
  const ImVec2 pos = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
  ctx.record.boxes[index] = {pos.x, pos.y, size.x, size.y};
  return true;
}

void end_panel() { ImGui::End(); }

void panel_help_button(PanelId id) {
  help_button(panel_key(id), panel_title(id), ts::app::panel_help(id));
}

void branch_with_token(PanelContext& ctx, int token) {
  const StepView& v = ctx.view;
  if (!ctx.snap || !ctx.ctl.worker() || v.step < 0 || !v.record) return;
  if (token == v.record->chosen_token) return;  // that is the lane itself
  ctx.state.error_text.clear();
  ctx.state.pending_lane = static_cast<int>(ctx.snap->lanes.size());
  ctx.state.pending_error_serial = ctx.snap->error_serial;
  ctx.ctl.worker()->branch(v.step, v.lane, token);
}

void empty_hint(const PanelContext& ctx, const char* what) {
  (void)ctx;
  ImGui::Spacing();
  dim_text_wrapped("%s", what);
}

}  // namespace ts::app
