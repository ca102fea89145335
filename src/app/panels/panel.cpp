#include "app/panels/panel.h"

#include "app/panels/panel_table.h"

namespace ts::app {

bool begin_panel(PanelContext& ctx, PanelId id, ImGuiWindowFlags flags) {
  const int index = static_cast<int>(id);
  bool& open = ctx.state.settings.open[index];
  if (!open) return false;
  const PanelRect& r = ctx.layout.rects[index];
  if (r.set) {
    const ImGuiCond cond = ctx.layout.force || r.force ? ImGuiCond_Always : ImGuiCond_FirstUseEver;
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

const char* branch_refusal(const SessionSnapshot* snap, const StepView& v) {
  if (!snap || v.step < 0 || !v.record) return "nothing to branch from yet";
  if (v.lane < 0 || v.lane >= static_cast<int>(snap->lanes.size())) return "no such lane";
  const Lane& lane = snap->lanes[v.lane];
  if (lane.beam_search()) return "a beam-search lane cannot branch (its beams are its branches)";
  if (lane.contrastive()) return "a contrastive lane cannot branch (it chooses by score)";
  if (lane.closed) return "this lane is closed";
  return nullptr;
}

const char* candidate_hint(const SessionSnapshot* snap, const StepView& v, int token) {
  if (v.record && token == v.record->chosen_token)
    return v.branched ? "chosen by you (a branch)" : "chosen by the strategy";
  const char* refusal = branch_refusal(snap, v);
  return refusal ? refusal : kBranchHint;
}

void branch_with_token(PanelContext& ctx, int token) {
  const StepView& v = ctx.view;
  if (!ctx.ctl.worker() || branch_refusal(ctx.snap, v)) return;
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
