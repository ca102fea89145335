#include "app/panel_roofline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ts::app {

const char* const RooflinePanel::kHelp =
    "The roofline: how fast a step could possibly run on this machine. x = "
    "arithmetic intensity (FLOPs per byte moved from memory, from the step's analytic "
    "cost); y = achieved FLOP/s (FLOPs over the measured wall time). The roof is the "
    "lower of two limits measured at start-up: memory bandwidth x intensity (the "
    "slope) and peak compute (the flat top).\n\nDecode reads every weight to "
    "process one token per lane, so it sits far left, under the slope: memory bound. "
    "Prefill reuses each weight for every prompt token and moves right, towards the "
    "compute roof. More lanes share one weight read, so their decode steps move "
    "right too.";

namespace {

std::string step_label(const StepTrace& t) {
  if (t.phase == Phase::kPrefill)
    return "prefill, " + std::to_string(t.lanes.empty() ? 0 : t.lanes[0].rows()) + " tokens";
  const int lanes = static_cast<int>(t.lanes.size());
  std::string s = "decode " + std::to_string(t.index);
  if (!t.kv_cache) s += ", cache off";
  if (lanes > 1) s += ", " + std::to_string(lanes) + " lanes";
  return s;
}

// Decades covering [lo, hi] on a log axis.
void log_range(double lo, double hi, double& a, double& b) {
  a = std::pow(10.0, std::floor(std::log10(lo)));
  b = std::pow(10.0, std::ceil(std::log10(hi)));
  if (b <= a) b = a * 10;
}

std::string si(double v, const char* unit) {
  char buf[48];
  const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  while (v >= 1000 && p < 5) {
    v /= 1000;
    ++p;
  }
  std::snprintf(buf, sizeof(buf), v < 10 ? "%.2g %s%s" : "%.0f %s%s", v, prefixes[p], unit);
  return buf;
}

}  // namespace

std::vector<RooflinePoint> history_points(const SessionSnapshot& snap, const Palette& pal) {
  std::vector<RooflinePoint> points;
  for (size_t i = 0; i < snap.history.size(); ++i) {
    const StepTrace& t = *snap.history[i];
    if (t.seconds <= 0 || t.cost.bytes() <= 0 || t.cost.flops <= 0) continue;
    RooflinePoint p;
    p.intensity = t.cost.intensity();
    p.flops_per_s = t.cost.flops / t.seconds;
    p.step = static_cast<int>(i);
    p.label = step_label(t);
    p.color = t.phase == Phase::kPrefill ? pal.accent2 : pal.accent;
    points.push_back(p);
  }
  return points;
}

void RooflinePanel::draw(PanelContext& ctx) {
  if (!begin_panel(ctx, PanelId::kRoofline)) return;
  if (!ctx.snap || !ctx.ctl.worker() || !ctx.ctl.analysis()) {
    empty_hint(ctx, ctx.ctl.needs_model_line().c_str());
    panel_help_button(PanelId::kRoofline);
    end_panel();
    return;
  }
  const SessionSnapshot& snap = *ctx.snap;
  AnalysisStore& analysis = *ctx.ctl.analysis();
  const auto roofs = analysis.roofs(*ctx.ctl.worker());
  ImGui::Text("Roofline of %s", snap.backend.c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("(%s)", snap.device.c_str());
  panel_help_button(PanelId::kRoofline);
  if (!roofs) {
    const std::string err = analysis.roofs_error();
    empty_hint(ctx, err.empty() ? "Measuring this machine's peak FLOP/s and memory bandwidth..."
                                : err.c_str());
    end_panel();
    return;
  }
  std::vector<RooflinePoint> points = history_points(snap, ctx.pal);
  // The KV cache comparison's runs (one lane each) as rings: its cached
  // decode steps beside the session's, its cache-off steps moving right as
  // the recomputed sequence grows.
  if (const auto cmp = analysis.cache_comparison()) {
    for (const bool cached : {true, false}) {
      const CacheRun& run = cached ? cmp->on : cmp->off;
      for (size_t s = 1; s < run.steps.size(); ++s) {
        const CacheRunStep& st = run.steps[s];
        if (st.seconds <= 0) continue;
        points.push_back({st.cost.intensity(), st.cost.flops / st.seconds, -1,
                          std::string(cached ? "cache on" : "cache off") + ", decode " +
                              std::to_string(s) + " (comparison run, 1 lane)",
                          cached ? ctx.pal.accent : ctx.pal.text_dim, true});
      }
    }
  }
  const double bw = roofs->effective_bandwidth();
  const double ridge = roofs->peak_flops / bw;
  dim_text_wrapped("Roofs %s: %s peak, %s main-memory bandwidth%s; ridge at %.1f FLOP/byte.",
                   roofs->how.c_str(), si(roofs->peak_flops, "FLOP/s").c_str(),
                   si(roofs->bandwidth, "B/s").c_str(),
                   roofs->working_set_bandwidth > 0
                       ? (", " + si(roofs->working_set_bandwidth, "B/s") + " for the " +
                          format_bytes(roofs->working_set_bytes) + " of weights (CPU caches)")
                             .c_str()
                       : "",
                   ridge);
  if (const std::string warning = analysis.roofs_warning(); !warning.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(ctx.pal.warning));
    ImGui::PushTextWrapPos(0.0f);
    ImGui::Text("\u25B2 %s", warning.c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
  }

  // Axes: every point, the ridge, and some room on either side.
  double x_lo = ridge / 100, x_hi = ridge * 10, y_lo = roofs->peak_flops / 1000;
  for (const RooflinePoint& p : points) {
    x_lo = std::min(x_lo, p.intensity / 2);
    x_hi = std::max(x_hi, p.intensity * 2);
    y_lo = std::min(y_lo, p.flops_per_s / 2);
  }
  double xa, xb, ya, yb;
  log_range(x_lo, x_hi, xa, xb);
  log_range(y_lo, roofs->peak_flops * 2, ya, yb);

  const float font = ImGui::GetFontSize();
  const char* explanation =
      "Decode reads every weight to produce one token per lane, so it sits left of the ridge, "
      "under the bandwidth slope: memory bound. Prefill reuses each weight for every prompt "
      "token and moves right, towards peak compute. More lanes per step move decode right.";
  const float explain_h =
      ImGui::GetFrameHeightWithSpacing() +
      ImGui::CalcTextSize(explanation, nullptr, false, ImGui::GetContentRegionAvail().x).y +
      ImGui::GetStyle().ItemSpacing.y * 2;
  ImVec2 size = ImGui::GetContentRegionAvail();
  size.y = std::max(size.y - explain_h, font * 8);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("roofline", size);
  const bool hovered_chart = ImGui::IsItemHovered();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float left = font * 4.2f, bottom = font * 2.4f, right = font * 0.8f, top = font * 1.5f;
  const ImVec2 p0(origin.x + left, origin.y + top);
  const ImVec2 p1(origin.x + size.x - right, origin.y + size.y - bottom);
  auto to_x = [&](double x) {
    return p0.x + static_cast<float>((std::log10(x) - std::log10(xa)) /
                                     (std::log10(xb) - std::log10(xa))) *
                      (p1.x - p0.x);
  };
  auto to_y = [&](double y) {
    return p1.y - static_cast<float>((std::log10(y) - std::log10(ya)) /
                                     (std::log10(yb) - std::log10(ya))) *
                      (p1.y - p0.y);
  };
  dl->AddRectFilled(p0, p1, ctx.pal.frame);
  // Decade grid with labels.
  for (double x = xa; x <= xb * 1.0001; x *= 10) {
    const float sx = to_x(x);
    dl->AddLine(ImVec2(sx, p0.y), ImVec2(sx, p1.y), ctx.pal.grid);
    char b[24];
    std::snprintf(b, sizeof(b), x < 1 ? "%.2g" : "%.0f", x);
    const float w = ImGui::CalcTextSize(b).x;
    dl->AddText(ImVec2(sx - w / 2, p1.y + 2), ctx.pal.text_dim, b);
  }
  for (double y = ya; y <= yb * 1.0001; y *= 10) {
    const float sy = to_y(y);
    dl->AddLine(ImVec2(p0.x, sy), ImVec2(p1.x, sy), ctx.pal.grid);
    const std::string b = si(y, "");
    const float w = ImGui::CalcTextSize(b.c_str()).x;
    dl->AddText(ImVec2(p0.x - w - 4, sy - font / 2), ctx.pal.text_dim, b.c_str());
  }
  const char* x_title = "arithmetic intensity: FLOPs per byte moved (analytic)";
  dl->AddText(ImVec2((p0.x + p1.x - ImGui::CalcTextSize(x_title).x) / 2, p1.y + font * 1.2f),
              ctx.pal.text_dim, x_title);
  dl->AddText(ImVec2(origin.x, origin.y), ctx.pal.text_dim, "FLOP/s");

  // The roof: bandwidth x intensity up to the ridge, then the compute peak.
  // When the weights fit in the CPU's caches, main memory's slope is drawn
  // thin below the one that really bounds the steps.
  dl->PushClipRect(p0, p1, true);
  // The roofs' labels, so that the viewed step's label can keep off them.
  std::vector<std::pair<ImVec2, ImVec2>> labels;
  auto label_at = [&](ImVec2 pos, ImU32 color, const std::string& text) {
    dl->AddText(pos, color, text.c_str());
    const ImVec2 size = ImGui::CalcTextSize(text.c_str());
    labels.push_back({pos, ImVec2(pos.x + size.x, pos.y + size.y)});
  };
  const double xr = std::clamp(ridge, xa, xb);
  const float thick = 2.5f * ctx.scale;
  if (roofs->working_set_bandwidth > roofs->bandwidth) {
    const double xm = std::clamp(roofs->peak_flops / roofs->bandwidth, xa, xb);
    dl->AddLine(ImVec2(to_x(xa), to_y(roofs->bandwidth * xa)),
                ImVec2(to_x(xm), to_y(roofs->bandwidth * xm)), ctx.pal.text_dim, 1.0f * ctx.scale);
    const std::string dram = "main memory " + si(roofs->bandwidth, "B/s");
    const double xd = std::max(xa * 1.3, xm / 30);
    label_at(ImVec2(to_x(xd) + 4, to_y(roofs->bandwidth * xd) + 2), ctx.pal.text_dim, dram);
  }
  dl->AddLine(ImVec2(to_x(xa), to_y(bw * xa)), ImVec2(to_x(xr), to_y(bw * xr)), ctx.pal.text,
              thick);
  dl->AddLine(ImVec2(to_x(xr), to_y(roofs->peak_flops)), ImVec2(to_x(xb), to_y(roofs->peak_flops)),
              ctx.pal.text, thick);
  const std::string peak_label = "peak compute " + si(roofs->peak_flops, "FLOP/s");
  label_at(ImVec2(std::min(to_x(xr) + 6, p1.x - ImGui::CalcTextSize(peak_label.c_str()).x - 4),
                  to_y(roofs->peak_flops) - font * 1.2f),
           ctx.pal.text, peak_label);
  const std::string bw_label = "memory bound: " + si(bw, "B/s") + " x intensity";
  const double xl = std::max(xa * 1.3, xr / 300);
  label_at(ImVec2(to_x(xl) + 4, to_y(bw * xl) - font * 1.3f), ctx.pal.text, bw_label);

  // Points; the viewed step is outlined and its label drawn.
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  int hovered = -1;
  float best = font * font;
  const float r = font * 0.35f;
  for (size_t i = 0; i < points.size(); ++i) {
    const RooflinePoint& p = points[i];
    const ImVec2 c(to_x(p.intensity), to_y(p.flops_per_s));
    if (p.ring)
      dl->AddCircle(c, r, p.color, 12, 1.5f);
    else
      dl->AddCircleFilled(c, r, with_alpha(p.color, 0.85f), 12);
    const float d = (c.x - mouse.x) * (c.x - mouse.x) + (c.y - mouse.y) * (c.y - mouse.y);
    if (hovered_chart && d < best) {
      best = d;
      hovered = static_cast<int>(i);
    }
  }
  for (const RooflinePoint& p : points) {
    if (p.step != ctx.view.step || p.step < 0) continue;
    const ImVec2 c(to_x(p.intensity), to_y(p.flops_per_s));
    dl->AddCircle(c, r * 1.8f, ctx.pal.selected, 16, 2.0f);
    const double roof = std::min(roofs->peak_flops, bw * p.intensity);
    char b[160];
    std::snprintf(b, sizeof(b), "%s: %.0f%% of the roof", p.label.c_str(),
                  100.0 * p.flops_per_s / roof);
    const float w = ImGui::CalcTextSize(b).x;
    // Below the point, else above it, else beside it: wherever no roof label is.
    const float x = std::clamp(c.x - w / 2, p0.x + 2, p1.x - w - 2);
    const ImVec2 tries[] = {ImVec2(x, c.y + r * 2.2f), ImVec2(x, c.y - r * 2.2f - font),
                            ImVec2(std::min(c.x + r * 2.5f, p1.x - w - 2), c.y - font * 0.5f)};
    ImVec2 at = tries[0];
    for (const ImVec2& t : tries) {
      const bool clear = std::none_of(labels.begin(), labels.end(), [&](const auto& l) {
        return t.x < l.second.x && t.x + w > l.first.x && t.y < l.second.y &&
               t.y + font > l.first.y;
      });
      if (clear) {
        at = t;
        break;
      }
    }
    dl->AddText(at, ctx.pal.text, b);
  }
  dl->PopClipRect();
  if (hovered >= 0) {
    const RooflinePoint& p = points[hovered];
    const double roof = std::min(roofs->peak_flops, bw * p.intensity);
    ImGui::SetTooltip("%s\n%.2f FLOP/byte, %s achieved\nroof here: %s (%s bound) -> %.0f%% of it",
                      p.label.c_str(), p.intensity, si(p.flops_per_s, "FLOP/s").c_str(),
                      si(roof, "FLOP/s").c_str(), p.intensity < ridge ? "memory" : "compute",
                      100.0 * p.flops_per_s / roof);
    if (ImGui::IsMouseClicked(ImGuiMouseButton_Left) && p.step >= 0) ctx.state.view_step = p.step;
  }
  // Legend and the one-line explanation.
  ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + size.y + 2));
  badge("prefill", ctx.pal.accent2, ctx.pal.frame);
  ImGui::SameLine();
  badge("decode", ctx.pal.accent, ctx.pal.frame);
  if (analysis.cache_comparison()) {
    ImGui::SameLine();
    ImGui::TextDisabled("rings: the KV cache comparison's runs (orange: cache on, grey: off)");
  }
  dim_text_wrapped("%s", explanation);
  end_panel();
}

}  // namespace ts::app
