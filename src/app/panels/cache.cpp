#include "app/panels/cache.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace ts::app {

const char* const CacheComparePanel::kHelp =
    "Why the KV cache exists, measured: the same prompt and strategy generate N "
    "tokens twice on this machine, once with the cache (each decode step feeds one "
    "token) and once without (each step feeds the whole sequence again, as a naive "
    "loop does).\n\nThe tokens and logits must be the same both ways: the cache only "
    "avoids recomputing keys and values that do not change. The cost is not the same: "
    "without the cache every step redoes all earlier tokens, so the work grows with "
    "the square of the length.";

namespace {

void totals_row(const char* name, const CacheRun& run, ImU32 color) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(color), "%s", name);
  int tokens = 0;
  for (const CacheRunStep& s : run.steps) tokens += s.tokens_run;
  ImGui::TableNextColumn();
  ImGui::Text("%d", tokens);
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(format_seconds(run.seconds()).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(format_flops(run.flops()).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(format_bytes_moved(run.bytes()).c_str());
}

}  // namespace

void CacheComparePanel::draw(PanelContext& ctx) {
  if (!begin_panel(ctx, PanelId::kCacheCompare)) return;
  if (!ctx.snap || !ctx.ctl.worker() || !ctx.ctl.analysis()) {
    empty_hint(ctx, ctx.ctl.needs_model_line().c_str());
    panel_help_button(PanelId::kCacheCompare);
    end_panel();
    return;
  }
  const SessionSnapshot& snap = *ctx.snap;
  AnalysisStore& analysis = *ctx.ctl.analysis();
  const float font = ImGui::GetFontSize();
  const bool busy = analysis.comparing();
  const int room = snap.config.n_ctx - static_cast<int>(snap.prompt_tokens.size()) + 1;
  // A comparison started elsewhere (--cache-compare, or one cut to the
  // context) sets the field to what actually ran.
  if (const auto cmp = analysis.cache_comparison(); cmp && cmp.get() != shown_) {
    shown_ = cmp.get();
    new_tokens_ = cmp->steps();
  }
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Generate");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(font * 6);
  ImGui::InputInt("##n", &new_tokens_, 16, 64);
  new_tokens_ = std::clamp(new_tokens_, 1, std::max(1, room));
  ImGui::SameLine();
  ImGui::Text("tokens with and without the cache");
  ImGui::SameLine();
  ImGui::BeginDisabled(busy || snap.prompt_tokens.empty());
  if (ImGui::Button(busy ? "running..." : "Run both ways"))
    analysis.compare_cache(*ctx.ctl.worker(), new_tokens_, ctx.state.strategy);
  ImGui::EndDisabled();
  panel_help_button(PanelId::kCacheCompare);
  const std::string err = analysis.comparison_error();
  if (!err.empty())
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.error), "%s", err.c_str());

  const auto cmp = analysis.cache_comparison();
  if (!cmp) {
    empty_hint(ctx,
               "Runs the prompt with the current strategy, on this machine, both ways, and "
               "shows what each step cost. The session itself is not touched.");
    end_panel();
    return;
  }
  // The proof: same tokens, same logits.
  const double tolerance = snap.backend == "cuda" ? 1e-3 : 1e-4;
  const bool ok = cmp->same_tokens && cmp->max_abs_logit_diff <= tolerance;
  char verdict[256];
  if (cmp->same_tokens)
    std::snprintf(verdict, sizeof(verdict),
                  "%s Same %d tokens both ways; largest logit difference %.2g (tolerance %.0e)",
                  ok ? "\u2714" : "\u2716", cmp->steps(), cmp->max_abs_logit_diff, tolerance);
  else
    std::snprintf(verdict, sizeof(verdict),
                  "\u2716 The tokens differ from step %d; largest logit difference %.2g",
                  cmp->first_difference, cmp->max_abs_logit_diff);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ok ? ctx.pal.ok : ctx.pal.error), "%s",
                     verdict);
  ImGui::TextDisabled("%s, prompt of %d tokens, %s", describe(cmp->params).c_str(),
                      static_cast<int>(cmp->prompt.size()), snap.backend.c_str());

  const ImGuiTableFlags tf = ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_SizingStretchProp;
  if (ImGui::BeginTable("totals", 5, tf)) {
    ImGui::TableSetupColumn("");
    ImGui::TableSetupColumn("tokens through the model");
    ImGui::TableSetupColumn("wall time");
    ImGui::TableSetupColumn("FLOPs");
    ImGui::TableSetupColumn("bytes moved");
    ImGui::TableHeadersRow();
    totals_row("with KV cache", cmp->on, ctx.pal.accent2);
    totals_row("without", cmp->off, ctx.pal.accent);
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted("without / with");
    int on_tokens = 0, off_tokens = 0;
    for (const CacheRunStep& s : cmp->on.steps) on_tokens += s.tokens_run;
    for (const CacheRunStep& s : cmp->off.steps) off_tokens += s.tokens_run;
    auto ratio = [](double a, double b) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.1fx", b > 0 ? a / b : 0.0);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(buf);
    };
    ratio(off_tokens, on_tokens);
    ratio(cmp->off.seconds(), cmp->on.seconds());
    ratio(cmp->off.flops(), cmp->on.flops());
    ratio(cmp->off.bytes(), cmp->on.bytes());
    ImGui::EndTable();
  }
  // Wall time is this machine's, now: one step slowed by another program can
  // turn the totals round while the FLOPs and bytes still say otherwise.
  std::vector<double> on_s, off_s;
  for (int s = 0; s < cmp->steps(); ++s) {
    on_s.push_back(cmp->on.steps[s].seconds);
    off_s.push_back(cmp->off.steps[s].seconds);
  }
  busy_step_ = timing_outlier_reversing(on_s, off_s);
  if (busy_step_ >= 0) {
    const std::string which =
        busy_step_ == 0 ? "the prefill" : "step " + std::to_string(busy_step_);
    ImGui::PushStyleColor(ImGuiCol_Text, ctx.pal.warning);
    text_wrapped(
        "\u25B2 The machine is busy: %s took far longer than the others and turns the wall-time "
        "totals round. Run both ways again; the FLOPs and bytes do not depend on it.",
        which.c_str());
    ImGui::PopStyleColor();
  }

  ImGui::Checkbox("cumulative", &cumulative_);
  ImGui::SameLine();
  ImGui::TextDisabled("step 0 is the prefill (the same both ways); hover a bar for its values");
  std::vector<std::string> labels;
  ChartSeries t_on{"with cache", {}, ctx.pal.accent2, {}}, t_off{"without", {}, ctx.pal.accent, {}};
  ChartSeries f_on = t_on, f_off = t_off;
  double ct_on = 0, ct_off = 0, cf_on = 0, cf_off = 0;
  for (int s = 0; s < cmp->steps(); ++s) {
    const CacheRunStep &a = cmp->on.steps[s], &b = cmp->off.steps[s];
    ct_on = cumulative_ ? ct_on + a.seconds : a.seconds;
    ct_off = cumulative_ ? ct_off + b.seconds : b.seconds;
    cf_on = cumulative_ ? cf_on + a.cost.flops : a.cost.flops;
    cf_off = cumulative_ ? cf_off + b.cost.flops : b.cost.flops;
    t_on.values.push_back(ct_on);
    t_off.values.push_back(ct_off);
    f_on.values.push_back(cf_on);
    f_off.values.push_back(cf_off);
    labels.push_back(s == 0 ? "prefill" : std::to_string(s));
  }
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float gap = ImGui::GetStyle().ItemSpacing.x;
  const ImVec2 size((avail.x - gap) / 2, std::max(avail.y, font * 5));
  ChartOptions o;
  o.x_labels = labels;
  o.title = cumulative_ ? "wall time so far" : "wall time per step";
  o.format = [](double v) { return format_seconds(v); };
  bar_chart("cmp_time", {t_on, t_off}, o, size);
  ImGui::SameLine(0, gap);
  o.title = cumulative_ ? "FLOPs so far" : "FLOPs per step";
  o.format = [](double v) { return format_flops(v); };
  bar_chart("cmp_flops", {f_on, f_off}, o, size);
  end_panel();
}

}  // namespace ts::app
