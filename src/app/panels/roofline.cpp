#include "app/panels/roofline.h"

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
    "right too.\n\nBatch sweep: decodes B independent sequences (each with the same "
    "short cached context) together in one batched step, for B = 1, 2, 4 ... 64, on an "
    "engine of its own (the session's KV cache and lanes are not touched). The weights are "
    "read once per step whatever B, so intensity grows with B: the series climbs the "
    "bandwidth slope until it crosses the ridge, where the step stops being memory bound. "
    "The ridge is marked, and so is the first batch size measured past it.";

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

// "12.3" with two significant digits below 10, none above.
std::string short_number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v < 10 ? "%.2g" : "%.0f", v);
  return b;
}

}  // namespace

void RooflinePanel::request_batch_sweep(std::vector<int> batches) {
  sweep_request_ = std::move(batches);
}

void RooflinePanel::cancel_batch_sweep() {
  sweep_request_.reset();
  if (sweep_) sweep_->cancel();
}

void RooflinePanel::sweep_controls(PanelContext& ctx, const HardwareRoofs& roofs) {
  SessionWorker& worker = *ctx.ctl.worker();
  if (sweep_ && sweep_worker_ != &worker) {  // another model: its sweep is stale
    sweep_->cancel();
    sweep_.reset();
  }
  if (sweep_request_) {
    if (sweep_) sweep_->cancel();
    BatchSweepOptions o;
    o.batches = std::move(*sweep_request_);
    sweep_request_.reset();
    sweep_ = std::make_shared<BatchSweepJob>(std::move(o), roofs.peak_flops,
                                             roofs.effective_bandwidth(), cpu_threads_);
    sweep_worker_ = &worker;
  }
  if (sweep_) sweep_->pump(worker);
  const BatchSweepJob::Status st = sweep_ ? sweep_->status() : BatchSweepJob::Status{};
  const bool running = sweep_ && !st.done && !st.cancelled;
  if (sweep_ && st.done && !st.cancelled && counted_sweep_.lock() != sweep_) {
    counted_sweep_ = sweep_;  // each finished sweep counted once (a lesson waits for it)
    ++ctx.state.batch_sweeps_finished;
  }
  if (running) {
    if (ImGui::SmallButton("Cancel sweep")) cancel_batch_sweep();
    ImGui::SameLine();
    char b[96];
    std::snprintf(b, sizeof b, "batch sweep: measuring B = %d (%zu of %zu)...", st.measuring,
                  st.points.size() + 1, st.total);
    ImGui::TextDisabled("%s", fit_text(b, ImGui::GetContentRegionAvail().x).c_str());
    return;
  }
  if (ImGui::SmallButton("Batch sweep")) request_batch_sweep();
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Decode B = 1, 2, 4 ... 64 independent sequences in one batched step each\n"
        "and plot them here (an engine of its own: the session is not touched).");
  if (!sweep_) return;
  ImGui::SameLine();
  if (ImGui::SmallButton("Clear")) {
    sweep_.reset();
    return;
  }
  ImGui::SameLine();
  std::string summary;
  if (!st.error.empty()) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.error), "%s",
                       fit_text(st.error, ImGui::GetContentRegionAvail().x).c_str());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", st.error.c_str());
    return;
  }
  if (st.cancelled) {
    summary = "batch sweep cancelled after " + std::to_string(st.points.size()) + " of " +
              std::to_string(st.total) + " batch sizes";
  } else {
    const BatchSweepResult& r = st.result;
    summary = "ridge " + short_number(r.ridge) + " FLOP/byte; the cost model crosses it at " +
              (r.predicted_crossing < 0 ? std::string("no batch")
                                        : "B \u2248 " + short_number(r.predicted_crossing)) +
              "; compute bound measured: " + r.first_compute_bound_text();
  }
  ImGui::TextUnformatted(fit_text(summary, ImGui::GetContentRegionAvail().x).c_str());
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", summary.c_str());
}

void RooflinePanel::sweep_table(PanelContext& ctx, const BatchSweepJob::Status& st, float height) {
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("batch_sweep", 8, flags, ImVec2(0, height))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* h :
       {"B", "ms/step", "tokens/s", "FLOP/byte", "FLOP/s", "roof", "% of roof", "roof there"})
    ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  for (const BatchSweepPoint& p : st.points) {
    ImGui::TableNextRow();
    const bool marked = p.batch == sweep_marked_;
    const ImU32 color = marked ? ctx.pal.warning : ctx.pal.text;
    const std::string cells[8] = {std::to_string(p.batch),
                                  short_number(p.seconds * 1e3),
                                  short_number(p.tokens_per_second),
                                  short_number(p.intensity),
                                  si(p.flops_per_s, ""),
                                  si(p.roof, ""),
                                  short_number(100 * p.fraction_of_roof),
                                  p.compute_roof ? "compute" : "memory"};
    for (const std::string& c : cells) {
      ImGui::TableNextColumn();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(color), "%s", c.c_str());
    }
    ++sweep_table_rows_;
  }
  ImGui::EndTable();
}

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
  points_.clear();
  labels_.clear();
  step_label_.clear();
  sweep_points_.clear();
  sweep_marked_ = 0;
  sweep_table_rows_ = 0;
  if (!begin_panel(ctx, PanelId::kRoofline)) {
    if (sweep_) sweep_->cancel();  // closed or collapsed: nobody sees it finish
    return;
  }
  if (!ctx.snap || !ctx.ctl.worker() || !ctx.ctl.analysis()) {
    if (sweep_) sweep_->cancel();
    empty_hint(ctx, ctx.ctl.needs_model_line().c_str());
    panel_help_button(PanelId::kRoofline);
    end_panel();
    return;
  }
  const SessionSnapshot& snap = *ctx.snap;
  AnalysisStore& analysis = *ctx.ctl.analysis();
  const std::shared_ptr<const HardwareRoofs> roofs =
      injected_ ? std::make_shared<const HardwareRoofs>(injected_->roofs)
                : analysis.roofs(*ctx.ctl.worker());
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
  // The batch sweep's points after the session's: a series of their own.
  const size_t sweep_begin = points.size();
  const BatchSweepJob::Status sweep = sweep_ ? sweep_->status() : BatchSweepJob::Status{};
  for (const BatchSweepPoint& p : sweep.points) {
    char b[160];
    std::snprintf(b, sizeof b, "batch sweep, B = %d: %s ms/step, %s tokens/s", p.batch,
                  short_number(p.seconds * 1e3).c_str(), short_number(p.tokens_per_second).c_str());
    points.push_back({p.intensity, p.flops_per_s, -1, b, ctx.pal.ok, false});
  }
  if (injected_ && injected_->flops_per_s)
    for (RooflinePoint& p : points) p.flops_per_s = injected_->flops_per_s(p);
  const double bw = roofs->effective_bandwidth();
  const double ridge = roofs->peak_flops / bw;
  // A short panel (a projector's font, four panels on screen) keeps its
  // room for the chart: the roofs and the warning take one line each (the
  // whole text on hover) and the explanation stays in the "?" help.
  const float font = ImGui::GetFontSize();
  // The sweep's control line and table take room of their own.
  const bool compact =
      ImGui::GetContentRegionAvail().y < font * (sweep.points.empty() && !sweep_ ? 26 : 38);
  char roofs_text[512];
  std::snprintf(roofs_text, sizeof roofs_text,
                "Roofs %s: %s peak, %s main-memory bandwidth%s; ridge at %.1f FLOP/byte.",
                roofs->how.c_str(), si(roofs->peak_flops, "FLOP/s").c_str(),
                si(roofs->bandwidth, "B/s").c_str(),
                roofs->working_set_bandwidth > 0
                    ? (", " + si(roofs->working_set_bandwidth, "B/s") + " for the " +
                       format_bytes(roofs->working_set_bytes) + " of weights (CPU caches)")
                          .c_str()
                    : "",
                ridge);
  const std::string warning = injected_ ? std::string() : analysis.roofs_warning();
  if (compact) {
    char brief[160];
    std::snprintf(brief, sizeof brief, "Roofs: %s peak, %s; ridge %.1f FLOP/byte",
                  si(roofs->peak_flops, "FLOP/s").c_str(), si(bw, "B/s").c_str(), ridge);
    ImGui::TextDisabled("%s", fit_text(brief, ImGui::GetContentRegionAvail().x).c_str());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", roofs_text);
    if (!warning.empty()) {
      ImGui::TextColored(
          ImGui::ColorConvertU32ToFloat4(ctx.pal.warning), "%s",
          fit_text("\u25B2 rough roofs: the machine is busy", ImGui::GetContentRegionAvail().x)
              .c_str());
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", warning.c_str());
    }
  } else {
    dim_text_wrapped("%s", roofs_text);
    if (!warning.empty()) {
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(ctx.pal.warning));
      ImGui::PushTextWrapPos(0.0f);
      ImGui::Text("\u25B2 %s", warning.c_str());
      ImGui::PopTextWrapPos();
      ImGui::PopStyleColor();
    }
  }

  sweep_controls(ctx, *roofs);

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

  const char* explanation =
      "Decode reads every weight to produce one token per lane, so it sits left of the ridge, "
      "under the bandwidth slope: memory bound. Prefill reuses each weight for every prompt "
      "token and moves right, towards peak compute. More lanes per step move decode right.";
  const float explain_h =
      ImGui::GetFrameHeightWithSpacing() + ImGui::GetStyle().ItemSpacing.y * 2 +
      (compact
           ? 0
           : ImGui::CalcTextSize(explanation, nullptr, false, ImGui::GetContentRegionAvail().x).y);
  ImVec2 size = ImGui::GetContentRegionAvail();
  // The sweep's table under the chart: every row when there is room, else
  // a third of the panel, scrolled.
  float table_h = 0;
  if (!sweep.points.empty()) {
    // A row: the text and the cells' padding above and below, plus its border.
    const float row_h = font + ImGui::GetStyle().CellPadding.y * 2 + 1;
    table_h = std::min(row_h * static_cast<float>(sweep.points.size() + 1) + 2,
                       std::max(row_h * 4, size.y * 0.3f));
  }
  size.y = std::max(size.y - explain_h - table_h, font * 8);
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
  const double xr = std::clamp(ridge, xa, xb);
  const float thick = 2.5f * ctx.scale;
  const bool two_slopes = roofs->working_set_bandwidth > roofs->bandwidth;
  const double xm = std::clamp(roofs->peak_flops / roofs->bandwidth, xa, xb);
  if (two_slopes)
    dl->AddLine(ImVec2(to_x(xa), to_y(roofs->bandwidth * xa)),
                ImVec2(to_x(xm), to_y(roofs->bandwidth * xm)), ctx.pal.text_dim, 1.0f * ctx.scale);
  dl->AddLine(ImVec2(to_x(xa), to_y(bw * xa)), ImVec2(to_x(xr), to_y(bw * xr)), ctx.pal.text,
              thick);
  dl->AddLine(ImVec2(to_x(xr), to_y(roofs->peak_flops)), ImVec2(to_x(xb), to_y(roofs->peak_flops)),
              ctx.pal.text, thick);

  // The sweep's series: a line through its points in batch order, and the
  // ridge, where it stops being memory bound, as a dashed vertical line.
  if (!sweep.points.empty()) {
    std::vector<size_t> order;
    for (size_t i = sweep_begin; i < points.size(); ++i) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return sweep.points[a - sweep_begin].batch < sweep.points[b - sweep_begin].batch;
    });
    std::vector<ImVec2> line;
    for (size_t i : order)
      line.push_back(ImVec2(to_x(points[i].intensity), to_y(points[i].flops_per_s)));
    dl->AddPolyline(line.data(), static_cast<int>(line.size()), with_alpha(ctx.pal.ok, 0.8f), 0,
                    2.0f * ctx.scale);
    const float rx = to_x(ridge);
    for (float y = p0.y; y < p1.y; y += font * 0.8f)
      dl->AddLine(ImVec2(rx, y), ImVec2(rx, std::min(y + font * 0.45f, p1.y)), ctx.pal.text_dim,
                  1.5f * ctx.scale);
  }

  // Points; the viewed step is outlined.
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
    points_.push_back({ImVec2(c.x - r, c.y - r), ImVec2(c.x + r, c.y + r)});
    const float d = (c.x - mouse.x) * (c.x - mouse.x) + (c.y - mouse.y) * (c.y - mouse.y);
    if (hovered_chart && d < best) {
      best = d;
      hovered = static_cast<int>(i);
    }
  }
  const float ring_r = r * 1.8f;
  sweep_points_.assign(points_.begin() + static_cast<long>(sweep_begin), points_.end());
  // The first compute-bound batch: the smallest measured past the ridge.
  for (const BatchSweepPoint& p : sweep.points)
    if (p.compute_roof && (sweep_marked_ == 0 || p.batch < sweep_marked_)) sweep_marked_ = p.batch;
  for (size_t i = sweep_begin; i < points.size(); ++i)
    if (sweep.points[i - sweep_begin].batch == sweep_marked_)
      dl->AddCircle(ImVec2(to_x(points[i].intensity), to_y(points[i].flops_per_s)), ring_r,
                    ctx.pal.warning, 16, 2.5f * ctx.scale);
  for (const RooflinePoint& p : points)
    if (p.step == ctx.view.step && p.step >= 0)
      dl->AddCircle(ImVec2(to_x(p.intensity), to_y(p.flops_per_s)), ring_r, ctx.pal.selected, 16,
                    2.0f);

  // The labels: each at the first of its places that is inside the chart and
  // clear of every point and of the labels placed before it. When none is
  // (a small chart), a roof's label is left out (the line above the chart
  // gives its number) and the step's goes on a backing at its first place.
  const float pad = 2 * ctx.scale;
  auto clear_at = [&](ImVec2 at, ImVec2 sz) {
    const ImVec2 a(at.x - pad, at.y - pad), b(at.x + sz.x + pad, at.y + sz.y + pad);
    if (a.x < p0.x || a.y < p0.y || b.x > p1.x || b.y > p1.y) return false;
    auto hits = [&](const RooflineBox& o) {
      return a.x < o.max.x && b.x > o.min.x && a.y < o.max.y && b.y > o.min.y;
    };
    return std::none_of(points_.begin(), points_.end(), hits) &&
           std::none_of(labels_.begin(), labels_.end(), hits);
  };
  auto place = [&](const std::vector<ImVec2>& tries, ImU32 color, const std::string& text,
                   bool optional) {
    const ImVec2 sz = ImGui::CalcTextSize(text.c_str());
    ImVec2 at = tries.front();
    bool clear = false;
    for (const ImVec2& t : tries)
      if (clear_at(t, sz)) {
        at = t;
        clear = true;
        break;
      }
    if (!clear && optional) return;
    at.x = std::clamp(at.x, p0.x + pad, std::max(p0.x + pad, p1.x - sz.x - pad));
    at.y = std::clamp(at.y, p0.y + pad, std::max(p0.y + pad, p1.y - sz.y - pad));
    // The step's label always sits on a backing: the roof lines cross the
    // chart and could run through its text; a roof's label only when crowded.
    if (!clear || !optional)
      dl->AddRectFilled(ImVec2(at.x - pad, at.y - pad),
                        ImVec2(at.x + sz.x + pad, at.y + sz.y + pad),
                        with_alpha(ctx.pal.frame, 0.9f), 2 * ctx.scale);
    dl->AddText(at, color, text.c_str());
    labels_.push_back({at, ImVec2(at.x + sz.x, at.y + sz.y)});
  };
  // Places along a slope y = slope * x from the left, above it (the text's
  // right end clear of the rising line too) or below it.
  const float decade_px = to_x(xa * 10) - to_x(xa);
  auto along_slope = [&](double slope, double x_end, bool above, float w) {
    std::vector<ImVec2> tries;
    for (const double f : {0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.02}) {
      const double x = xa * std::pow(x_end / xa, f);
      const double x_right = x * std::pow(10.0, (w + 4) / decade_px);
      tries.push_back(above ? ImVec2(to_x(x) + 4, to_y(slope * x_right) - font * 1.2f)
                            : ImVec2(to_x(x) + 4, to_y(slope * x) + font * 0.2f));
    }
    return tries;
  };
  // The viewed step's label first: below the point, above it, beside it,
  // then further away, wherever no point is. The roofs' labels come after
  // and keep off it (placed last, it had to go on a backing over a roof's
  // label when the points left it no other place).
  for (const RooflinePoint& p : points) {
    if (p.step != ctx.view.step || p.step < 0) continue;
    const ImVec2 c(to_x(p.intensity), to_y(p.flops_per_s));
    const double roof = std::min(roofs->peak_flops, bw * p.intensity);
    char b[160];
    std::snprintf(b, sizeof(b), "%s: %.0f%% of the roof", p.label.c_str(),
                  100.0 * p.flops_per_s / roof);
    const float w = ImGui::CalcTextSize(b).x;
    const float x = std::clamp(c.x - w / 2, p0.x + 2, p1.x - w - 2);
    std::vector<ImVec2> tries;
    for (int k = 0; k < 6; ++k) {
      const float off = ring_r + pad + k * font * 1.2f;
      tries.push_back(ImVec2(x, c.y + off));
      tries.push_back(ImVec2(x, c.y - off - font));
      tries.push_back(ImVec2(c.x + off, c.y - font * 0.5f));
      tries.push_back(ImVec2(c.x - off - w, c.y - font * 0.5f));
    }
    // Then anywhere in the chart, nearest first, with a line to its point
    // (many runs of a comparison can crowd every place next to it).
    const size_t near_tries = tries.size();
    std::vector<ImVec2> far;
    for (float y = p0.y + pad; y + font <= p1.y - pad; y += font * 0.6f)
      for (float gx = p0.x + pad; gx + w <= p1.x - pad; gx += std::max(8.0f, w / 6))
        far.push_back(ImVec2(gx, y));
    const auto dist2 = [&](ImVec2 q) {
      const float dx = q.x + w / 2 - c.x, dy = q.y + font / 2 - c.y;
      return dx * dx + dy * dy;
    };
    std::stable_sort(far.begin(), far.end(),
                     [&](ImVec2 l, ImVec2 r) { return dist2(l) < dist2(r); });
    tries.insert(tries.end(), far.begin(), far.end());
    const size_t before = labels_.size();
    place(tries, ctx.pal.text, b, false);
    if (labels_.size() > before) {
      const RooflineBox& box = labels_.back();
      const bool near = std::any_of(tries.begin(), tries.begin() + near_tries,
                                    [&](ImVec2 t) { return t.x == box.min.x && t.y == box.min.y; });
      if (!near) {
        const ImVec2 edge(std::clamp(c.x, box.min.x, box.max.x),
                          std::clamp(c.y, box.min.y, box.max.y));
        dl->AddLine(c, edge, ctx.pal.text_dim, ctx.scale);
      }
    }
    step_label_ = b;
    break;
  }
  // The sweep's labels: the first compute-bound batch (always shown), the
  // ridge, then "B = n" beside each point where there is room.
  auto around = [&](ImVec2 c, const std::string& text) {
    const ImVec2 sz = ImGui::CalcTextSize(text.c_str());
    std::vector<ImVec2> tries;
    for (int k = 0; k < 4; ++k) {
      const float off = r + pad + k * font * 0.9f;
      tries.push_back(ImVec2(c.x - sz.x / 2, c.y - off - sz.y));  // above
      tries.push_back(ImVec2(c.x - sz.x / 2, c.y + off));         // below
      tries.push_back(ImVec2(c.x + off, c.y - sz.y / 2));         // right
      tries.push_back(ImVec2(c.x - off - sz.x, c.y - sz.y / 2));  // left
    }
    return tries;
  };
  for (size_t i = sweep_begin; i < points.size(); ++i)
    if (sweep.points[i - sweep_begin].batch == sweep_marked_)
      place(around(ImVec2(to_x(points[i].intensity), to_y(points[i].flops_per_s)),
                   "compute bound from B = " + std::to_string(sweep_marked_)),
            ctx.pal.warning, "compute bound from B = " + std::to_string(sweep_marked_), false);
  if (!sweep.points.empty()) {
    const std::string text = "ridge " + short_number(ridge) + " FLOP/byte";
    const float w = ImGui::CalcTextSize(text.c_str()).x, rx = to_x(ridge);
    std::vector<ImVec2> tries;
    for (float y = p1.y - font * 1.3f; y > p0.y; y -= font * 1.1f) {
      tries.push_back(ImVec2(rx + 4, y));
      tries.push_back(ImVec2(rx - w - 4, y));
    }
    place(tries, ctx.pal.text_dim, text, true);
  }
  for (size_t i = sweep_begin; i < points.size(); ++i) {
    const std::string text = "B=" + std::to_string(sweep.points[i - sweep_begin].batch);
    place(around(ImVec2(to_x(points[i].intensity), to_y(points[i].flops_per_s)), text), ctx.pal.ok,
          text, true);
  }
  const std::string peak_label = "peak compute " + si(roofs->peak_flops, "FLOP/s");
  {
    const float w = ImGui::CalcTextSize(peak_label.c_str()).x;
    const float y_above = to_y(roofs->peak_flops) - font * 1.25f;
    const float y_below = to_y(roofs->peak_flops) + font * 0.25f;
    std::vector<ImVec2> tries;
    for (const float y : {y_above, y_below})
      for (const float f : {0.0f, 0.25f, 0.5f, 0.75f, 1.0f})
        tries.push_back(ImVec2(to_x(xr) + 6 + f * std::max(0.0f, p1.x - to_x(xr) - w - 10), y));
    place(tries, ctx.pal.text, peak_label, true);
  }
  const std::string bw_label = "memory bound: " + si(bw, "B/s") + " x intensity";
  place(along_slope(bw, xr, true, ImGui::CalcTextSize(bw_label.c_str()).x), ctx.pal.text, bw_label,
        true);
  if (two_slopes) {
    const std::string dram = "main memory " + si(roofs->bandwidth, "B/s");
    place(along_slope(roofs->bandwidth, xm, false, 0), ctx.pal.text_dim, dram, true);
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
  // The sweep's table, the legend and the one-line explanation.
  ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + size.y + 2));
  if (table_h > 0) sweep_table(ctx, sweep, table_h);
  badge("prefill", ctx.pal.accent2, ctx.pal.frame);
  ImGui::SameLine();
  badge("decode", ctx.pal.accent, ctx.pal.frame);
  if (!sweep.points.empty()) {
    ImGui::SameLine();
    badge("batch sweep", ctx.pal.ok, ctx.pal.frame);
  }
  if (analysis.cache_comparison()) {
    ImGui::SameLine();
    ImGui::TextDisabled("%s", fit_text("rings: the KV cache comparison's runs (orange: cache on, "
                                       "grey: off)",
                                       ImGui::GetContentRegionAvail().x)
                                  .c_str());
  }
  if (!compact) dim_text_wrapped("%s", explanation);
  end_panel();
}

}  // namespace ts::app
