#include "app/panels/timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ts::app {

const char* const TimelinePanel::kHelp =
    "Each step's measured wall time and its analytic cost: FLOPs (arithmetic) and "
    "bytes that must move from memory (the weights, the KV cache read and "
    "written).\n\nFLOPs per byte is the arithmetic intensity. Prefill processes many "
    "tokens per weight read (high intensity: compute bound); decode processes one "
    "token per lane (low intensity: memory bound). Click a bar to look at that step.\n\n"
    "A speculative lane's step is one round: its bar stacks the draft model's passes "
    "(one per drafted token, on a small model) under the target's single verify pass over "
    "all of them. The round commits up to \u03B3 + 1 tokens for that one target pass.\n\n"
    "A lookahead or prompt-lookup lane's step is one pass over many rows (the last token, "
    "the candidates, the window): the \"tokens / rows fed\" chart puts the tokens each "
    "pass committed beside the rows it fed, and a bar's tooltip says \"3 tok / 17 fed\".";

TimelineBar timeline_bar(const StepTrace& t) {
  TimelineBar b;
  for (const LaneStep& ls : t.lanes) {
    if (ls.lookahead) {
      ++b.passes;
      b.pass_committed += static_cast<int>(ls.lookahead->committed.size());
      b.pass_fed += ls.lookahead->fed();
    }
    if (!ls.spec) continue;
    const SpecRound& r = *ls.spec;
    ++b.rounds;
    b.drafted += r.gamma;
    b.committed += static_cast<int>(r.committed.size());
    b.draft_seconds += r.draft_seconds;
    b.verify_seconds += r.verify_seconds;
    b.draft_cost += r.draft_cost;
    b.verify_cost += r.verify_cost;
  }
  b.rest_seconds = t.seconds;
  b.rest_cost = t.cost;
  if (b.rounds == 0) return b;
  // The step's totals include the rounds' passes (Session::step adds them):
  // what is left is the other lanes' forward, none when only rounds ran.
  auto less = [](double total, double part) { return std::max(0.0, total - part); };
  b.rest_seconds = less(t.seconds, b.draft_seconds + b.verify_seconds);
  b.rest_cost.flops = less(t.cost.flops, b.draft_cost.flops + b.verify_cost.flops);
  b.rest_cost.weight_bytes =
      less(t.cost.weight_bytes, b.draft_cost.weight_bytes + b.verify_cost.weight_bytes);
  b.rest_cost.kv_read_bytes =
      less(t.cost.kv_read_bytes, b.draft_cost.kv_read_bytes + b.verify_cost.kv_read_bytes);
  b.rest_cost.kv_write_bytes =
      less(t.cost.kv_write_bytes, b.draft_cost.kv_write_bytes + b.verify_cost.kv_write_bytes);
  // Rounding of the sums: a remainder below a part in a million is none.
  if (b.rest_seconds <= 1e-6 * t.seconds) b.rest_seconds = 0;
  return b;
}

std::string timeline_note(const TimelineBar& b) {
  if (b.rounds == 0) return {};
  std::string s = "draft " + format_seconds(b.draft_seconds) + " + verify " +
                  format_seconds(b.verify_seconds) + " \u00B7 \u03B3 " + std::to_string(b.drafted) +
                  " drafted, " + std::to_string(b.committed) + " committed";
  if (b.rounds > 1) s += " (" + std::to_string(b.rounds) + " rounds)";
  if (b.rest_seconds > 0) s += " \u00B7 other lanes " + format_seconds(b.rest_seconds);
  return s;
}

std::string timeline_pass_note(const TimelineBar& b) {
  if (b.passes == 0) return {};
  std::string s =
      std::to_string(b.pass_committed) + " tok / " + std::to_string(b.pass_fed) + " fed";
  if (b.passes > 1) s += " (" + std::to_string(b.passes) + " passes)";
  return s;
}

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
  last_wall_.clear();
  last_passes_.clear();
  last_notes_.clear();
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

  std::vector<std::string> labels, notes;
  std::vector<ImU32> colors;
  ChartSeries wall{"wall time", {}, ctx.pal.accent2, {}};
  ChartSeries flops{"FLOPs", {}, ctx.pal.accent2, {}};
  ChartSeries bytes{"bytes moved", {}, ctx.pal.accent2, {}};
  ChartSeries intensity{"FLOPs per byte", {}, ctx.pal.accent2, {}};
  // Speculative rounds: their draft and verify passes stacked on the rest.
  const ImU32 draft_color = ctx.pal.ok, verify_color = ctx.pal.accent2;
  ChartSeries wall_draft{"draft passes", {}, draft_color, {}};
  ChartSeries wall_verify{"verify pass", {}, verify_color, {}};
  ChartSeries flops_draft = wall_draft, flops_verify = wall_verify;
  ChartSeries bytes_draft = wall_draft, bytes_verify = wall_verify;
  // Lookahead and prompt-lookup passes: tokens committed beside rows fed.
  ChartSeries pass_tokens{"tokens committed", {}, ctx.pal.ok, {}};
  ChartSeries pass_rows{"rows fed", {}, ctx.pal.accent2, {}};
  bool any_spec = false, any_pass = false;
  for (int i = 0; i < n; ++i) {
    const StepTrace& t = *snap.history[i];
    const TimelineBar b = timeline_bar(t);
    any_spec |= b.rounds > 0;
    any_pass |= b.passes > 0;
    labels.push_back(t.phase == Phase::kPrefill ? "prefill" : std::to_string(i));
    std::string note = timeline_note(b);
    const std::string pass_note = timeline_pass_note(b);
    if (!pass_note.empty()) note += (note.empty() ? "" : " \u00B7 ") + pass_note;
    notes.push_back(std::move(note));
    pass_tokens.values.push_back(b.pass_committed);
    pass_rows.values.push_back(b.pass_fed);
    colors.push_back(t.phase == Phase::kPrefill ? ctx.pal.accent2 : ctx.pal.accent);
    wall.values.push_back(b.rest_seconds);
    flops.values.push_back(b.rest_cost.flops);
    bytes.values.push_back(b.rest_cost.bytes());
    intensity.values.push_back(t.cost.intensity());
    wall_draft.values.push_back(b.draft_seconds);
    wall_verify.values.push_back(b.verify_seconds);
    flops_draft.values.push_back(b.draft_cost.flops);
    flops_verify.values.push_back(b.verify_cost.flops);
    bytes_draft.values.push_back(b.draft_cost.bytes());
    bytes_verify.values.push_back(b.verify_cost.bytes());
  }
  for (ChartSeries* s : {&wall, &flops, &bytes, &intensity}) s->bar_colors = colors;
  auto with_rounds = [&](const ChartSeries& rest, const ChartSeries& draft,
                         const ChartSeries& verify) {
    return any_spec ? std::vector<ChartSeries>{rest, draft, verify}
                    : std::vector<ChartSeries>{rest};
  };
  last_wall_ = with_rounds(wall, wall_draft, wall_verify);
  if (any_pass) last_passes_ = {pass_tokens, pass_rows};
  last_notes_ = notes;

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
                format_flops(t.cost.flops).c_str(), format_bytes_moved(t.cost.bytes()).c_str(),
                t.cost.intensity(), fs > 0 ? format_rate(fs, "FLOP").c_str() : "-");
    // A speculative step: what its one bar is made of.
    const TimelineBar b = timeline_bar(t);
    if (b.rounds > 0) {
      const float s = font * 0.7f;
      ImDrawList* dl = ImGui::GetWindowDrawList();
      for (const auto& [c, name] : {std::pair{draft_color, "draft"}, {verify_color, "verify"}}) {
        const ImVec2 p = ImGui::GetCursorScreenPos();
        const float y = p.y + (ImGui::GetTextLineHeight() - s) * 0.5f;
        dl->AddRectFilled(ImVec2(p.x, y), ImVec2(p.x + s, y + s), c);
        ImGui::Dummy(ImVec2(s, ImGui::GetTextLineHeight()));
        ImGui::SameLine(0, font * 0.3f);
        ImGui::TextDisabled("%s", name);
        ImGui::SameLine(0, font * 0.6f);
      }
      ImGui::TextWrapped("%s", timeline_note(b).c_str());
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "The draft model proposed %d token%s one pass at a time (%s); the target checked "
            "them all in ONE pass over the cached prefix (%s) and kept %d token%s: %d for "
            "about the price of one target pass plus the small draft's.",
            b.drafted, b.drafted == 1 ? "" : "s", format_seconds(b.draft_seconds).c_str(),
            format_seconds(b.verify_seconds).c_str(), b.committed, b.committed == 1 ? "" : "s",
            b.committed);
    }
    // Lookahead and prompt-lookup passes: the tokens for the rows.
    if (b.passes > 0) {
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.ok), "%s",
                         timeline_pass_note(b).c_str());
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "The step's lookahead or prompt-lookup pass%s committed %d token%s in one forward "
            "pass over %d rows (the last token, the candidates and the window): the rows are "
            "the pass's cost, the tokens what it bought.",
            b.passes == 1 ? "" : "es", b.pass_committed, b.pass_committed == 1 ? "" : "s",
            b.pass_fed);
    }
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
  const int charts = any_pass ? 5 : 4;
  const bool grid = avail.x < font * 12 * charts;  // two rows when narrow, else one
  const int cols = grid ? (charts + 1) / 2 : charts;
  const float chart_w = (avail.x - (cols - 1) * gap) / static_cast<float>(cols);
  const float chart_h = grid ? (avail.y - ImGui::GetStyle().ItemSpacing.y) / 2.0f : avail.y;
  const ImVec2 size(chart_w, std::max(chart_h, font * 3.5f));
  int drawn = 0;
  auto chart = [&](const char* id, const char* title, const std::vector<ChartSeries>& s,
                   std::function<std::string(double)> fmt, bool stacked) {
    if (drawn % cols != 0) ImGui::SameLine(0, gap);
    ++drawn;
    ChartOptions o;
    o.title = title;
    o.format = std::move(fmt);
    o.x_labels = labels;
    o.highlight = ctx.view.step;
    o.stacked = stacked && s.size() > 1;
    o.x_notes = notes;
    const int clicked = bar_chart(id, s, o, size);
    if (clicked >= 0) ctx.state.view_step = clicked;
  };
  chart(
      "wall", "wall time", last_wall_, [](double v) { return format_seconds(v); }, true);
  chart(
      "flops", "FLOPs", with_rounds(flops, flops_draft, flops_verify),
      [](double v) { return format_flops(v); }, true);
  chart(
      "bytes", "bytes moved", with_rounds(bytes, bytes_draft, bytes_verify),
      [](double v) { return format_bytes_moved(v); }, true);
  chart(
      "intensity", "FLOPs per byte", {intensity},
      [](double v) {
        char b[32];
        std::snprintf(b, sizeof(b), "%.2f", v);
        return std::string(b);
      },
      false);
  // Side by side, not stacked: what each pass bought against what it cost.
  if (any_pass)
    chart(
        "passes", "tokens / rows fed", last_passes_,
        [](double v) { return std::to_string(static_cast<long long>(std::llround(v))); }, false);
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
      ImGui::TextUnformatted(format_bytes_moved(t.cost.bytes()).c_str());
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
