// `tokenscope --bench-frames N`: frame times with a large attention map on
// screen. Three runs of N frames: the same window without the attention
// panel (the baseline), the map static (the usual case: it is re-coloured
// only when the step, layer, head or scale changes), and the map re-uploaded
// and re-coloured every frame (the worst case). Prints JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "app/app.h"
#include "app/render/gl.h"
#include "util/error.h"
#include "util/median.h"

namespace ts::app {

namespace {

struct Stats {
  double median_ms = 0, p99_ms = 0, mean_ms = 0, max_ms = 0;
  double ui_ms = 0, render_ms = 0, swap_ms = 0;  // medians of the parts
};

struct Sample {
  double total_ms, ui_ms, render_ms, swap_ms;
};

Stats stats(const std::vector<Sample>& samples) {
  Stats s;
  std::vector<double> ms, ui, render, swap;
  for (const Sample& x : samples) {
    ms.push_back(x.total_ms);
    ui.push_back(x.ui_ms);
    render.push_back(x.render_ms);
    swap.push_back(x.swap_ms);
  }
  s.median_ms = median(ms);
  s.ui_ms = median(ui);
  s.render_ms = median(render);
  s.swap_ms = median(swap);
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  s.p99_ms =
      ms[std::min(ms.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(ms.size())))];
  s.max_ms = ms.back();
  double sum = 0;
  for (double v : ms) sum += v;
  s.mean_ms = sum / static_cast<double>(ms.size());
  return s;
}

std::vector<Sample> measure(App& app, int frames) {
  std::vector<Sample> out;
  out.reserve(frames);
  for (int i = 0; i < frames; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    app.frame();
    gl::finish();  // count the GPU's (here: llvmpipe's) work, not only the submission
    const FrameRecord& r = app.last_frame();
    out.push_back(
        {std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
         r.ui_seconds * 1e3, r.render_seconds * 1e3, r.swap_seconds * 1e3});
  }
  return out;
}

void print_stats(const char* name, const Stats& s, bool last) {
  std::printf(
      "  \"%s\": {\"median_ms\": %.3f, \"p99_ms\": %.3f, \"mean_ms\": %.3f, \"max_ms\": %.3f, "
      "\"median_fps\": %.1f, \"median_ui_ms\": %.3f, \"median_render_ms\": %.3f, "
      "\"median_swap_ms\": %.3f}%s\n",
      name, s.median_ms, s.p99_ms, s.mean_ms, s.max_ms,
      s.median_ms > 0 ? 1000.0 / s.median_ms : 0.0, s.ui_ms, s.render_ms, s.swap_ms,
      last ? "" : ",");
}

}  // namespace

int run_frame_benchmark(const AppOptions& options) {
  AppOptions o = options;
  o.save_layout = false;
  if (o.layout.empty()) o.layout = "classroom";
  App app(o);
  app.window().set_timed(true);
  if (!app.has_heatmap_renderer()) {
    std::fprintf(stderr, "tokenscope: %s\n", app.notices().c_str());
    return 2;
  }
  bool model = true;
  try {
    app.load_model_blocking();
    app.frame();
    app.controller().advance(app.state().strategies());  // prefill, so every panel has content
    app.settle(4, 100);
  } catch (const Error& e) {
    model = false;
    std::fprintf(stderr, "tokenscope: no model (%s); benchmarking the attention panel alone\n",
                 e.what());
  }
  // Baseline: the same window without the attention panel.
  bool& attention_open = app.state().settings.panel_open(PanelId::kAttention);
  const bool was_open = attention_open;
  attention_open = false;
  measure(app, 10);
  const Stats baseline = stats(measure(app, o.bench_frames));
  (void)was_open;
  attention_open = true;
  app.attention_panel().set_synthetic(synthetic_attention(o.bench_size), false);
  measure(app, 10);  // warm-up: textures allocated, glyphs cached
  const Stats still = stats(measure(app, o.bench_frames));
  app.attention_panel().set_synthetic(synthetic_attention(o.bench_size), true);
  measure(app, 5);
  const Stats moving = stats(measure(app, o.bench_frames));
  const HeatmapImage& img = app.attention_panel().image();
  std::printf("{\n");
  std::printf(
      "  \"frames\": %d,\n  \"attention_size\": %d,\n  \"window\": [%d, %d],\n  \"layout\": "
      "\"%s\",\n",
      o.bench_frames, o.bench_size, o.width, o.height, o.layout.c_str());
  std::printf(
      "  \"heatmap_texture\": [%d, %d],\n  \"cells_per_pixel\": %d,\n  \"model_loaded\": %s,\n"
      "  \"gl_errors\": %lld,\n",
      img.color().width(), img.color().height(), img.cells_per_px(), model ? "true" : "false",
      static_cast<long long>(gl::error_count()));
  std::printf("  \"renderer\": \"%s\",\n", app.window().renderer().c_str());
  print_stats("without_attention_panel", baseline, false);
  print_stats("static_map", still, false);
  print_stats("recoloured_every_frame", moving, true);
  std::printf("}\n");
  return 0;
}

}  // namespace ts::app
