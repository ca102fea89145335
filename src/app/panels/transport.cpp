#include "app/panels/transport.h"

#include <algorithm>

#include <cmath>

namespace ts::app {

const char* const TransportPanel::kHelp =
    "Prefill runs the whole prompt through the model in one parallel pass and fills the "
    "KV cache. Then the model pauses.\n\nEach decode step feeds one token (the one "
    "chosen last), reads the keys and values of every earlier token from the cache, "
    "appends its own, and produces logits for the next token.\n\nKeys: Space = prefill "
    "/ step, \u2192 or Page Down = step, \u2190 or Page Up = step back (what a "
    "presentation clicker sends). Run steps on its own at the chosen speed.";

std::string TransportPanel::where_text(const SessionSnapshot& snap) {
  switch (snap.state) {
    case SessionState::kNoPrompt:
      return "No prompt yet";
    case SessionState::kReady:
      return "Ready: the prompt waits for prefill";
    case SessionState::kFinished:
      return "Finished";
    case SessionState::kPaused:
      break;
  }
  const int n = static_cast<int>(snap.history.size());
  if (snap.running)
    return n <= 1 ? "Running: prefill done" : "Running: decode step " + std::to_string(n - 1);
  if (n <= 1) return "Paused after prefill";
  return "Paused after decode step " + std::to_string(n - 1);
}

std::string TransportPanel::next_text(const SessionSnapshot& snap) {
  if (snap.state != SessionState::kPaused) return snap.next_action;
  bool lookahead = false, prompt_lookup = false;
  for (const Lane& lane : snap.lanes) {
    if (!lane.running()) continue;
    lookahead = lookahead || lane.params.lookahead_on;
    prompt_lookup = prompt_lookup || lane.params.prompt_lookup_on;
  }
  if (!lookahead && !prompt_lookup) return snap.next_action;
  const char* kinds = lookahead && prompt_lookup ? "lookahead and prompt-lookup lanes"
                      : lookahead                ? "lookahead lanes"
                                                 : "prompt-lookup lanes";
  return snap.next_action + "; " + kinds + ": one pass each (the last token and the candidates" +
         (lookahead ? ", and the window," : "") + " fed together) that may commit several tokens";
}

void TransportPanel::draw(PanelContext& ctx) {
  if (!begin_panel(ctx, PanelId::kTransport)) return;
  AppState& st = ctx.state;
  if (!ctx.snap) {
    if (ctx.ctl.loading())
      ImGui::Text("Loading model %s ...", ctx.ctl.loading_what().c_str());
    else
      empty_hint(ctx, "No model loaded. Use File \u2192 Load model.");
    panel_help_button(PanelId::kTransport);
    end_panel();
    return;
  }
  const SessionSnapshot& snap = *ctx.snap;
  const bool busy = snap.busy;

  // Where we are (large) and what the next action computes.
  if (ctx.heading_font) ImGui::PushFont(ctx.heading_font);
  const std::string where = where_text(snap);
  ImGui::TextUnformatted(where.c_str());
  if (ctx.heading_font) ImGui::PopFont();
  if (busy && !snap.running) {
    ImGui::SameLine();
    const char spin[] = "|/-\\";
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.accent), "computing %c",
                       spin[static_cast<int>(ImGui::GetTime() * 8) % 4]);
  }
  panel_help_button(PanelId::kTransport);
  ImGui::TextDisabled("Next:");
  ImGui::SameLine();
  if (snap.state == SessionState::kFinished) {
    // Why each lane stopped can be long (eight lanes): one line, the rest on
    // hover, so the controls below stay in view.
    const std::string line = fit_text(snap.next_action, ImGui::GetContentRegionAvail().x);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.accent), "%s", line.c_str());
    if (line != snap.next_action && ImGui::IsItemHovered())
      ImGui::SetTooltip("%s", snap.next_action.c_str());
  } else {
    ImGui::PushStyleColor(ImGuiCol_Text, ctx.pal.accent);
    text_wrapped("%s", next_text(snap).c_str());
    ImGui::PopStyleColor();
  }

  // Buttons.
  const bool can_step = snap.state == SessionState::kReady || snap.state == SessionState::kPaused;
  const bool ready = snap.state == SessionState::kReady;
  ImGui::BeginDisabled(!can_step || snap.running);
  if (ImGui::Button(ready ? "Prefill  [Space]" : "Step \u25B6  [Space]")) {
    st.error_text.clear();
    st.view_step = -1;
    ctx.ctl.advance(st.strategies());
  }
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::BeginDisabled(snap.history.empty() || snap.running);
  if (ImGui::Button("\u25C0 Back  [\u2190]")) {
    st.error_text.clear();
    st.view_step = -1;
    ctx.ctl.back();
  }
  ImGui::EndDisabled();
  ImGui::SameLine();
  if (snap.running) {
    if (ImGui::Button("Pause")) ctx.ctl.pause();
  } else {
    ImGui::BeginDisabled(!can_step);
    if (ImGui::Button("Run")) {
      st.error_text.clear();
      st.view_step = -1;
      ctx.ctl.run(st.settings.run_speed, st.strategies());
    }
    ImGui::EndDisabled();
  }
  ImGui::SameLine();
  ImGui::BeginDisabled(snap.history.empty() || snap.running);
  if (ImGui::Button("Reset")) {
    st.error_text.clear();
    st.view_step = -1;
    st.attention.query = -1;
    ctx.ctl.reset(st.strategies());
  }
  ImGui::EndDisabled();
  // The speed slider goes beside the buttons when its label fits, else below.
  const float speed_w = ImGui::CalcTextSize("Run: 0.25 steps/s").x +
                        ImGui::GetStyle().FramePadding.x * 2 + ImGui::GetFontSize();
  const float room = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x -
                     ImGui::GetItemRectMax().x - ImGui::GetStyle().ItemSpacing.x;
  if (room >= speed_w) ImGui::SameLine();
  ImGui::SetNextItemWidth(std::max(ImGui::GetContentRegionAvail().x, speed_w));
  if (ImGui::SliderFloat("##speed", &st.settings.run_speed, 0.25f, 20.0f, "Run: %.2g steps/s",
                         ImGuiSliderFlags_Logarithmic) &&
      snap.running)
    ctx.ctl.run(st.settings.run_speed, st.strategies());

  // Which step is shown.
  const int n = static_cast<int>(snap.history.size());
  if (n > 0) {
    int shown = ctx.view.step;
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("Showing");
    ImGui::SameLine();
    // Narrower in a narrow panel, so "follow newest" stays in view.
    const ImGuiStyle& style = ImGui::GetStyle();
    const float follow_w = ImGui::GetFrameHeight() + style.ItemInnerSpacing.x +
                           ImGui::CalcTextSize("follow newest").x + style.ItemSpacing.x;
    ImGui::SetNextItemWidth(std::clamp(ImGui::GetContentRegionAvail().x - follow_w,
                                       ImGui::GetFontSize() * 6, ImGui::GetFontSize() * 12));
    if (ImGui::SliderInt("##view", &shown, 0, n - 1, shown == 0 ? "prefill" : "decode step %d"))
      st.view_step = shown;
    ImGui::SameLine();
    bool follow = st.view_step < 0;
    if (ImGui::Checkbox("follow newest", &follow)) st.view_step = follow ? -1 : ctx.view.step;
  }

  // Session options.
  int max_new = snap.max_new_tokens;
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Max new tokens");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
  if (ImGui::InputInt("##maxnew", &max_new, 1, 16, ImGuiInputTextFlags_EnterReturnsTrue) &&
      max_new > 0)
    ctx.ctl.set_max_new_tokens(max_new);
  ImGui::SameLine();
  bool kv = snap.kv_cache;
  ImGui::BeginDisabled(!snap.history.empty());
  if (ImGui::Checkbox("KV cache", &kv)) ctx.ctl.set_kv_cache(kv);
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("%s", snap.history.empty()
                                ? "Off: every decode step recomputes the whole sequence."
                                : "Can be switched before prefill (press Reset first).");
  end_panel();
}

}  // namespace ts::app
