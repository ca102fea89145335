#include "app/panels/logits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sampling/distribution.h"

namespace ts::app {

const char* const LogitsPanel::kHelp =
    "The model's output for the next position: one score (logit) per token of the "
    "vocabulary. Softmax turns logits into probabilities that sum to 1.\n\n"
    "Entropy measures how unsure the model is: 0 nats = certain; e^entropy is the "
    "number of equally likely tokens that would be as uncertain. The small plot shows "
    "every token of the vocabulary ranked by probability.";

void compute_logits_view(const LaneStep& record, LogitsView& out) {
  out.ranked = top_n(record.logits, static_cast<int>(record.logits.size()));
  out.probs = softmax(record.logits);
  out.logprobs = log_softmax(record.logits);
  out.entropy = entropy_nats(out.probs);
}

void LogitsPanel::draw(PanelContext& ctx) {
  if (!begin_panel(ctx, PanelId::kLogits)) return;
  Settings& set = ctx.state.settings;
  const float font = ImGui::GetFontSize();
  int view = static_cast<int>(set.logit_view);
  ImGui::AlignTextToFramePadding();
  ImGui::RadioButton("probability", &view, 0);
  ImGui::SameLine();
  ImGui::RadioButton("logit", &view, 1);
  ImGui::SameLine();
  ImGui::RadioButton("log-prob", &view, 2);
  set.logit_view = static_cast<LogitView>(view);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(font * 5);
  ImGui::SliderInt("##topn", &set.top_n, 3, 40, "top %d");
  panel_help_button(PanelId::kLogits);

  const StepView& v = ctx.view;
  if (!ctx.snap || !v.record || v.record->logits.empty()) {
    empty_hint(ctx,
               ctx.snap ? "Logits appear after prefill: press Space." : "No model loaded yet.");
    end_panel();
    return;
  }
  if (lv_.trace != v.trace || lv_.lane != v.lane) {
    compute_logits_view(*v.record, lv_);
    lv_.trace = v.trace;
    lv_.lane = v.lane;
    kept_ = ctx.snap->history[v.step];
  }
  const std::string after = v.cached > 0 ? token_piece(*ctx.snap, v.tokens[v.cached - 1]) : "";
  // Numbered like the token strip and Attention: the position of the token
  // they follow.
  heading_ = "Scores for the token after \u201C" + after + "\u201D (position " +
             std::to_string(v.cached - 1) + ")";
  dim_text_wrapped("%s", heading_.c_str());
  ImGui::Text("Entropy %.2f nats", lv_.entropy);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "0 = certain. e^entropy = %.1f: as uncertain as a fair choice among that many tokens.",
        std::exp(lv_.entropy));
  ImGui::SameLine();
  ImGui::TextDisabled("(like %.1f equally likely tokens)", std::exp(lv_.entropy));

  // A short panel (a projector's large fonts) keeps its height for the
  // candidates: the ranking plot is drawn only where the bars keep room for
  // about six rows beside it.
  const float avail = ImGui::GetContentRegionAvail().y;
  const float plot_h = std::clamp(avail * 0.28f, font * 4.5f, font * 8.0f);
  if (avail - plot_h >= font * 8) {
    draw_bars(ctx, avail - plot_h - ImGui::GetStyle().ItemSpacing.y);
    draw_vocab_plot(ctx, ImVec2(ImGui::GetContentRegionAvail().x, plot_h));
  } else {
    draw_bars(ctx, avail);
  }
  end_panel();
}

void LogitsPanel::draw_bars(PanelContext& ctx, float height) {
  const StepView& v = ctx.view;
  const Settings& set = ctx.state.settings;
  const int n = std::min<int>(set.top_n, static_cast<int>(lv_.ranked.size()));
  const float font = ImGui::GetFontSize();
  const int chosen = v.record->chosen_token;
  // Bar lengths relative to the range shown: probabilities from 0, logits
  // and log-probabilities from a little below the smallest value shown.
  auto value = [&](int id) -> double {
    switch (set.logit_view) {
      case LogitView::kLogit:
        return v.record->logits[id];
      case LogitView::kLogProb:
        return lv_.logprobs[id];
      case LogitView::kProbability:
        break;
    }
    return lv_.probs[id];
  };
  const double vmax = value(lv_.ranked[0]);
  double vmin = value(lv_.ranked[n - 1]);
  double lo =
      set.logit_view == LogitView::kProbability ? 0.0 : vmin - 0.15 * std::max(vmax - vmin, 1.0);
  if (set.logit_view == LogitView::kLogProb) lo = std::min(lo, vmin - 1.0);
  ImGui::BeginChild("bars", ImVec2(0, std::max(height, font * 3)), false);
  if (ImGui::BeginTable("top", 3, ImGuiTableFlags_SizingFixedFit)) {
    ImGui::TableSetupColumn("token", ImGuiTableColumnFlags_WidthFixed, font * 7.5f);
    ImGui::TableSetupColumn("bar", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("value", ImGuiTableColumnFlags_WidthFixed, font * 4.2f);
    for (int i = 0; i < n; ++i) {
      const int id = lv_.ranked[i];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const std::string piece = token_piece(*ctx.snap, id);
      if (token_cell(id, piece, id == chosen, ctx.pal.accent)) branch_with_token(ctx, id);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("rank %d \u00B7 id %d\nlogit %.3f\nprobability %.4f\nlog-prob %.3f\n%s",
                          i + 1, id, v.record->logits[id], lv_.probs[id], lv_.logprobs[id],
                          candidate_hint(ctx.snap, v, id));
      ImGui::TableNextColumn();
      const double val = value(id);
      const float frac = static_cast<float>((val - lo) / std::max(vmax - lo, 1e-12));
      inline_bar(frac, ImGui::GetContentRegionAvail().x, font * 0.8f,
                 id == chosen ? ctx.pal.accent : ctx.pal.accent2,
                 ImGui::GetColorU32(ImGuiCol_FrameBg));
      ImGui::TableNextColumn();
      if (set.logit_view == LogitView::kProbability)
        ImGui::TextUnformatted(format_percent(val).c_str());
      else
        ImGui::Text("%6.2f", val);
    }
    ImGui::EndTable();
  }
  if (chosen >= 0) {
    const auto it = std::find(lv_.ranked.begin(), lv_.ranked.end(), chosen);
    const int rank = static_cast<int>(it - lv_.ranked.begin());
    if (rank >= n)
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.accent),
                         "chosen: \u201C%s\u201D at rank %d (%.2f%%)",
                         token_piece(*ctx.snap, chosen).c_str(), rank + 1, lv_.probs[chosen] * 100);
  }
  ImGui::EndChild();
}

void LogitsPanel::draw_vocab_plot(PanelContext& ctx, ImVec2 size) {
  const int vocab = static_cast<int>(lv_.ranked.size());
  if (vocab < 2 || size.y < 20) return;
  const float font = ImGui::GetFontSize();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("vocabplot", size);
  const bool hovered = ImGui::IsItemHovered();
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const std::string title =
      "All " + format_count(vocab) + " tokens ranked: probability (log scale)";
  dl->AddText(origin, dim, title.c_str());
  const ImVec2 p0(origin.x + font * 2.6f, origin.y + font * 1.2f);
  const ImVec2 p1(origin.x + size.x - 2, origin.y + size.y - font * 1.1f);
  dl->AddRectFilled(p0, p1, ImGui::GetColorU32(ImGuiCol_FrameBg));
  // x: rank on a log axis (1 .. vocab); y: log10 probability from 1e-8 to 1.
  const double lx = std::log10(static_cast<double>(vocab));
  auto xr = [&](double rank) {
    return p0.x + static_cast<float>(std::log10(rank) / lx) * (p1.x - p0.x);
  };
  const double ymin = -8.0;
  auto yp = [&](double p) {
    const double t = (std::log10(std::max(p, 1e-12)) - ymin) / (0.0 - ymin);
    return p1.y - static_cast<float>(std::clamp(t, 0.0, 1.0)) * (p1.y - p0.y);
  };
  auto yc = [&](double c) { return p1.y - static_cast<float>(c) * (p1.y - p0.y); };
  for (int e = 0; e >= -8; e -= 4) {
    char b[16];
    std::snprintf(b, sizeof(b), e == 0 ? "1" : "1e%d", e);
    dl->AddLine(ImVec2(p0.x, yp(std::pow(10.0, e))), ImVec2(p1.x, yp(std::pow(10.0, e))),
                ImGui::GetColorU32(ImGuiCol_Separator, 0.5f));
    dl->AddText(ImVec2(origin.x, yp(std::pow(10.0, e)) - font * 0.5f), dim, b);
  }
  // Sample the ranked curve at log-spaced ranks (a few hundred points).
  const int samples = std::clamp(static_cast<int>(p1.x - p0.x), 16, 400);
  std::vector<ImVec2> prob_line, cum_line;
  double cum = 0;
  int next = 0;
  for (int s = 0; s <= samples; ++s) {
    const int rank =
        std::min(vocab, static_cast<int>(std::round(std::pow(10.0, lx * s / samples))));
    while (next < rank) cum += lv_.probs[lv_.ranked[next++]];
    const double p = lv_.probs[lv_.ranked[rank - 1]];
    prob_line.push_back(ImVec2(xr(rank), yp(p)));
    cum_line.push_back(ImVec2(xr(rank), yc(cum)));
  }
  dl->AddPolyline(cum_line.data(), static_cast<int>(cum_line.size()), with_alpha(ctx.pal.bar, 0.8f),
                  0, 1.5f * ctx.scale);
  dl->AddPolyline(prob_line.data(), static_cast<int>(prob_line.size()), ctx.pal.accent2, 0,
                  2.0f * ctx.scale);
  // The chosen token on the curve.
  const int chosen = ctx.view.record->chosen_token;
  if (chosen >= 0) {
    const int rank = static_cast<int>(std::find(lv_.ranked.begin(), lv_.ranked.end(), chosen) -
                                      lv_.ranked.begin()) +
                     1;
    dl->AddCircleFilled(ImVec2(xr(rank), yp(lv_.probs[chosen])), 4.0f * ctx.scale, ctx.pal.accent);
  }
  // Axis labels.
  char b[48];
  std::snprintf(b, sizeof(b), "rank %s", format_count(vocab).c_str());
  dl->AddText(ImVec2(p0.x, p1.y + 1), dim, "rank 1");
  dl->AddText(ImVec2(p1.x - ImGui::CalcTextSize(b).x, p1.y + 1), dim, b);
  // Legend on the title line, right-aligned, when there is room.
  const char* l1 = "\u2014 probability";
  const char* l2 = "\u2014 cumulative";
  const float w1 = ImGui::CalcTextSize(l1).x, w2 = ImGui::CalcTextSize(l2).x;
  const float title_w = ImGui::CalcTextSize(title.c_str()).x;
  if (title_w + w1 + w2 + font * 2 < size.x) {
    dl->AddText(ImVec2(origin.x + size.x - w2, origin.y), ctx.pal.bar, l2);
    dl->AddText(ImVec2(origin.x + size.x - w2 - font - w1, origin.y), ctx.pal.accent2, l1);
  }
  if (hovered) {
    const float mx = ImGui::GetIO().MousePos.x;
    const double t = std::clamp((mx - p0.x) / (p1.x - p0.x), 0.0f, 1.0f);
    const int rank = std::clamp(static_cast<int>(std::round(std::pow(10.0, lx * t))), 1, vocab);
    double c = 0;
    for (int i = 0; i < rank; ++i) c += lv_.probs[lv_.ranked[i]];
    const int id = lv_.ranked[rank - 1];
    ImGui::SetTooltip(
        "rank %d: \u201C%s\u201D  p = %.2e\ntop %d tokens hold %.1f%% of the probability", rank,
        token_piece(*ctx.snap, id).c_str(), lv_.probs[id], rank, c * 100);
  }
}

}  // namespace ts::app
