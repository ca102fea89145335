#include "app/panel_timeline.h"

#include <algorithm>
#include <cstdio>

namespace ts::app {

const char* const TimelinePanel::kHelp =
    "Each step's measured wall time and its analytic cost: FLOPs (arithmetic) and "
    "bytes that must move from memory (the weights, the KV cache read and "
    "written).\n\nFLOPs per byte is the arithmetic intensity. Prefill processes many "
    "tokens per weight read (high intensity: compute bound); decode processes one "
    "token per lane (low intensity: memory bound). Click a bar to look at that step.";

void TimelinePanel::draw(PanelContext& ctx) {
  if (!begin_panel(ctx, PanelId::kTimeline)) return;
  if (!ctx.snap) {
    empty_hint(ctx, "No model loaded yet.");
    panel_help_button(PanelId::kTimeline);
    end_panel();
    return;
  }
  const SessionSnapshot& snap = *ctx.snap;
  const float font = ImGui::GetFontSize();
  ImGui::Text("Cost of each step on %s", snap.backend.c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("(%s)", snap.device.c_str());
  panel_help_button(PanelId::kTimeline);
  const int n = static_cast<int>(snap.history.size());
  if (n == 0) {
    empty_hint(ctx, "Each step's wall time, FLOPs and bytes appear here as you step.");
    end_panel();
    return;
  }

  std::vector<std::string> labels;
  std::vector<ImU32> colors;
  ChartSeries wall{"wall time", {}, ctx.pal.accent2, {}};
  ChartSeries flops{"FLOPs", {}, ctx.pal.accent2, {}};
  ChartSeries bytes{"bytes moved", {}, ctx.pal.accent2, {}};
  ChartSeries intensity{"FLOPs per byte", {}, ctx.pal.accent2, {}};
  for (int i = 0; i < n; ++i) {
    const StepTrace& t = *snap.history[i];
    labels.push_back(t.phase == Phase::kPrefill ? "prefill" : std::to_string(i));
    colors.push_back(t.phase == Phase::kPrefill ? ctx.pal.accent2 : ctx.pal.accent);
    wall.values.push_back(t.seconds);
    flops.values.push_back(t.cost.flops);
    bytes.values.push_back(t.cost.bytes());
    intensity.values.push_back(t.cost.intensity());
  }
  for (ChartSeries* s : {&wall, &flops, &bytes, &intensity}) s->bar_colors = colors;

  // The viewed step in one line (what the highlighted bars say).
  if (ctx.view.trace) {
    const StepTrace& t = *ctx.view.trace;
    const double fs = t.seconds > 0 ? t.cost.flops / t.seconds : 0;
    ImGui::TextColored(
        ImGui::ColorConvertU32ToFloat4(t.phase == Phase::kPrefill ? ctx.pal.accent2
                                                                  : ctx.pal.accent),
        "%s",
        t.phase == Phase::kPrefill ? "prefill" : ("decode " + std::to_string(t.index)).c_str());
    ImGui::SameLine();
    ImGui::Text("%s · %s · %s · %.2f FLOP/byte · %s", format_seconds(t.seconds).c_str(),
                format_flops(t.cost.flops).c_str(), format_bytes(t.cost.bytes()).c_str(),
                t.cost.intensity(), fs > 0 ? format_rate(fs, "FLOP").c_str() : "-");
  }
  ImGui::SameLine();
  const char* toggle = show_table_ ? "charts" : "table";
  ImGui::SameLine(std::max(ImGui::GetCursorPosX(), ImGui::GetWindowContentRegionMax().x -
                                                       ImGui::CalcTextSize(toggle).x -
                                                       ImGui::GetStyle().FramePadding.x * 2));
  if (ImGui::SmallButton(toggle)) show_table_ = !show_table_;

  const ImVec2 avail = ImGui::GetContentRegionAvail();
  if (show_table_) {
    draw_table(ctx, avail.y);
    end_panel();
    return;
  }
  const float gap = ImGui::GetStyle().ItemSpacing.x;
  const bool grid = avail.x < font * 48;  // 2 x 2 when narrow, else one row
  const float chart_w = grid ? (avail.x - gap) / 2.0f : (avail.x - 3 * gap) / 4.0f;
  const float chart_h = grid ? (avail.y - ImGui::GetStyle().ItemSpacing.y) / 2.0f : avail.y;
  const ImVec2 size(chart_w, std::max(chart_h, font * 3.5f));
  auto chart = [&](const char* id, const char* title, const ChartSeries& s,
                   std::function<std::string(double)> fmt, bool same_line) {
    if (same_line) ImGui::SameLine(0, gap);
    ChartOptions o;
    o.title = title;
    o.format = std::move(fmt);
    o.x_labels = labels;
    o.highlight = ctx.view.step;
    const int clicked = bar_chart(id, {s}, o, size);
    if (clicked >= 0) ctx.state.view_step = clicked;
  };
  chart(
      "wall", "wall time", wall, [](double v) { return format_seconds(v); }, false);
  chart(
      "flops", "FLOPs", flops, [](double v) { return format_flops(v); }, true);
  chart(
      "bytes", "bytes moved", bytes, [](double v) { return format_bytes(v); }, !grid);
  chart(
      "intensity", "FLOPs per byte", intensity,
      [](double v) {
        char b[32];
        std::snprintf(b, sizeof(b), "%.2f", v);
        return std::string(b);
      },
      true);
  end_panel();
}

void TimelinePanel::draw_table(PanelContext& ctx, float table_h) {
  const SessionSnapshot& snap = *ctx.snap;
  const int n = static_cast<int>(snap.history.size());
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchProp;
  if (ImGui::BeginTable("steps", 8, flags, ImVec2(0, table_h))) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("step");
    ImGui::TableSetupColumn("tokens in");
    ImGui::TableSetupColumn("wall time");
    ImGui::TableSetupColumn("FLOPs");
    ImGui::TableSetupColumn("bytes");
    ImGui::TableSetupColumn("FLOP/byte");
    ImGui::TableSetupColumn("FLOP/s");
    ImGui::TableSetupColumn("bytes/s");
    ImGui::TableHeadersRow();
    for (int i = 0; i < n; ++i) {
      const StepTrace& t = *snap.history[i];
      int tokens_in = 0;
      for (const LaneStep& ls : t.lanes) tokens_in += ls.rows();
      if (t.phase == Phase::kPrefill && !t.lanes.empty()) tokens_in = t.lanes[0].rows();
      if (!t.kv_cache) tokens_in = t.recomputed_tokens;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      char name[32];
      std::snprintf(name, sizeof(name), t.phase == Phase::kPrefill ? "prefill" : "decode %d", i);
      if (ImGui::Selectable(name, i == ctx.view.step, ImGuiSelectableFlags_SpanAllColumns))
        ctx.state.view_step = i;
      ImGui::TableNextColumn();
      ImGui::Text("%d", tokens_in);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(format_seconds(t.seconds).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(format_flops(t.cost.flops).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(format_bytes(t.cost.bytes()).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.2f", t.cost.intensity());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(t.seconds > 0 ? format_rate(t.cost.flops / t.seconds, "FLOP").c_str()
                                           : "-");
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(t.seconds > 0 ? format_rate(t.cost.bytes() / t.seconds, "B").c_str()
                                           : "-");
    }
    if (n != last_rows_ && ctx.state.view_step < 0) ImGui::SetScrollHereY(1.0f);
    last_rows_ = n;
    ImGui::EndTable();
  }
}

}  // namespace ts::app
