// GUI test of the Compare panel on the bundled model: --compare-precision
// runs the session's prompt under two weight formats (--compare-model: under
// the model and its draft); the table has a row
// per step with the first divergence highlighted where the two formats' own
// greedy texts (run here on two engines of their own) first differ, the plot
// a bar per step with the same one marked, and the continuations side by
// side. In presentation mode at projector sizes, and resized small, the
// panel stays inside the window with room to read.
// Run:  xvfb-run -a -s "-screen 0 1920x1080x24 -noreset" build/ts_gui_tests
// --gtest_filter='GuiPrecision*'
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/app.h"
#include "app/panels/kv.h"
#include "app/panels/precision.h"
#include "gui_test_support.h"
#include "session/model_setup.h"
#include "util/error.h"

namespace ts::app {
namespace {

constexpr int kSteps = 16;  // the panel's default: rows 0..16

AppOptions precision_options(PrecisionPair pair, bool presentation = false) {
  AppOptions o = test::fixture_options("formats");
  o.setup.model.clear();  // the bundled model
  o.compare_precision = pair;
  o.presentation = presentation;
  return o;
}

namespace fs = std::filesystem;

// The bundled draft, beside the bundled model.
fs::path draft_dir() { return default_model_path().parent_path() / "tokenscope-tiny-draft"; }

AppOptions model_options(bool presentation = false) {
  AppOptions o = test::fixture_options("formats");
  o.setup.model.clear();  // the bundled model
  o.compare_model = draft_dir();
  o.presentation = presentation;
  return o;
}

// Frames until the panel's run is over (it runs on the session's worker).
void wait_for_panel(App& app) {
  for (int i = 0; i < 400 && (app.precision_panel().busy() || !app.precision_panel().result()); ++i)
    app.settle(1, 2);
  app.settle(2, 4);
}

// The engine's own greedy tokens after `prompt`, `rows` of them.
std::vector<int> greedy_tokens(WeightFormat format, const std::string& prompt, int rows,
                               const fs::path& model = {}) {
  ModelSetupOptions o;
  o.model = model;
  o.device = "cpu";
  o.cpu_threads = 2;
  o.weights = format;
  LoadedModel m = load_model_setup(o);
  std::vector<int> in;
  for (const TokenSpan& t : m.tokenizer->encode_prompt(prompt)) in.push_back(t.id);
  const SeqId seq = m.engine->cache().create();
  std::vector<int> out;
  for (int i = 0; i < rows; ++i) {
    const std::vector<float> l =
        m.engine->forward({ForwardRequest{seq, in}}, ForwardOptions{}).outputs[0].logits;
    out.push_back(argmax_token(l.data(), l.size()));
    in = {out.back()};
  }
  m.engine->cache().release(seq);
  return out;
}

void expect_inside_window(App& app, float w, float h) {
  const FrameRecord& r = app.last_frame();
  const int i = static_cast<int>(PanelId::kPrecision);
  ASSERT_TRUE(r.drawn[i]);
  const PanelBox& b = r.boxes[i];
  EXPECT_GE(b.x, 0);
  EXPECT_GE(b.y, 0);
  EXPECT_LE(b.x + b.w, w + 0.5f);
  EXPECT_LE(b.y + b.h, h + 0.5f);
  // The plot (when the panel has room for it) lies within the panel.
  const PrecisionPanel::Drawn& d = app.precision_panel().drawn();
  if (d.plot_bars == 0) return;
  EXPECT_GE(d.plot_x0, b.x);
  EXPECT_LE(d.plot_x1, b.x + b.w + 0.5f);
  EXPECT_GE(d.plot_y0, b.y);
  EXPECT_LE(d.plot_y1, b.y + b.h + 0.5f);
  EXPECT_GT(d.plot_x1 - d.plot_x0, 0);
  EXPECT_GT(d.plot_y1 - d.plot_y0, 0);
}

// Loads the model, sees the panel drawn and waits for the run its flag starts.
void open_and_run(App& app) {
  app.load_model_blocking();
  app.settle();
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kPrecision));
  wait_for_panel(app);
  ASSERT_EQ(app.precision_panel().error(), "");
}

TEST(GuiPrecision, TheFlagRunsTheComparisonAndMarksTheFirstDivergence) {
  REQUIRE_DISPLAY();
  App app(precision_options({WeightFormat::kF32, WeightFormat::kQ4}));
  ASSERT_NO_FATAL_FAILURE(open_and_run(app));
  PrecisionPanel& panel = app.precision_panel();
  const auto r = panel.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->pair.reference, WeightFormat::kF32);
  EXPECT_EQ(r->pair.compared, WeightFormat::kQ4);
  ASSERT_EQ(static_cast<int>(r->steps.size()), kSteps + 1);
  EXPECT_EQ(r->prompt, "Today's weather is so");

  // Each format's own greedy text, from engines of the test's own.
  const std::vector<int> ref = greedy_tokens(WeightFormat::kF32, r->prompt, kSteps + 1);
  const std::vector<int> q4 = greedy_tokens(WeightFormat::kQ4, r->prompt, kSteps + 1);
  EXPECT_EQ(r->reference_tokens, ref);
  EXPECT_EQ(r->free_tokens, q4);
  const int diverge = first_difference(ref, q4);
  ASSERT_GE(diverge, 0) << "q4 follows f32 for every step: pick a longer run";
  EXPECT_EQ(r->summary.first_divergence, diverge);

  const PrecisionPanel::Drawn& d = panel.drawn();
  EXPECT_EQ(d.table_rows, kSteps + 1);
  EXPECT_EQ(d.highlighted_row, diverge);
  EXPECT_EQ(d.plot_bars, kSteps + 1);
  EXPECT_EQ(d.plot_marked_bar, diverge);
  EXPECT_TRUE(d.continuations);
  expect_inside_window(app, 1280, 800);

  // Another pair through the panel's own entry point (its Run button).
  panel.run(*app.controller().worker(), {WeightFormat::kBF16, WeightFormat::kQ8}, "The cat sat on",
            3);
  wait_for_panel(app);
  const auto r2 = panel.result();
  ASSERT_TRUE(r2);
  EXPECT_EQ(precision_pair_name(r2->pair), "bf16,q8");
  EXPECT_EQ(r2->steps.size(), 4u);
  EXPECT_EQ(panel.drawn().table_rows, 4);
  for (const PrecisionStep& s : r2->steps) EXPECT_GT(s.kl, 0.0);
}

// --compare-model with the bundled draft: the panel opens in its models
// mode, names the two models, and its first divergence, KV bytes per token
// and texts are those of the two models run on engines of the test's own.
TEST(GuiPrecision, TheModelFlagComparesTheDraftWithTheModel) {
  REQUIRE_DISPLAY();
  App app(model_options());
  ASSERT_NO_FATAL_FAILURE(open_and_run(app));
  PrecisionPanel& panel = app.precision_panel();
  EXPECT_EQ(panel.mode(), PrecisionPanel::Mode::kModels);
  const auto r = panel.result();
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->models);
  EXPECT_EQ(r->labels.reference, "tokenscope-tiny");
  EXPECT_EQ(r->labels.compared, "tokenscope-tiny-draft");
  ASSERT_EQ(static_cast<int>(r->steps.size()), kSteps + 1);
  const std::vector<int> ref = greedy_tokens(WeightFormat::kF32, r->prompt, kSteps + 1);
  const std::vector<int> draft =
      greedy_tokens(WeightFormat::kF32, r->prompt, kSteps + 1, draft_dir());
  EXPECT_EQ(r->reference_tokens, ref);
  EXPECT_EQ(r->free_tokens, draft);
  const int diverge = first_difference(ref, draft);
  EXPECT_EQ(r->summary.first_divergence, diverge);
  // The draft has fewer layers: fewer KV bytes per token, fewer weights.
  EXPECT_LT(r->summary.compared_kv_token_bytes, r->summary.reference_kv_token_bytes);
  EXPECT_LT(r->summary.compared_weight_bytes, r->summary.reference_weight_bytes);
  const PrecisionPanel::Drawn& d = panel.drawn();
  EXPECT_EQ(d.table_rows, kSteps + 1);
  EXPECT_EQ(d.highlighted_row, diverge);
  EXPECT_EQ(d.plot_bars, kSteps + 1);
  EXPECT_TRUE(d.continuations);
  expect_inside_window(app, 1280, 800);

  // A model with another vocabulary is the panel's one-line error.
  panel.run_models(*app.controller().worker(), test::fixture_model(), "The cat sat on", 3);
  wait_for_panel(app);
  EXPECT_NE(panel.error().find("compared model: its vocabulary has"), std::string::npos)
      << panel.error();
}

TEST(GuiPrecision, TheKvPanelShowsABytesPerTokenLineForEachLoadedModel) {
  REQUIRE_DISPLAY();
  AppOptions o = test::fixture_options("memory");
  o.setup.model.clear();  // the bundled model
  App app(o);
  app.load_model_blocking();
  app.settle();
  app.advance();
  app.settle(3, 10);
  const KvCachePanel& kv = app.kv_cache_panel();
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kKvCache));
  const std::string gpt2 =
      "tokenscope-tiny: 2 (K, V) \u00D7 4 KV heads \u00D7 64 dims \u00D7 4 B = 2.0 KiB per "
      "token per layer, 8.0 KiB per token in 4 layers";
  ASSERT_EQ(kv.token_bytes_drawn().size(), 1u);
  EXPECT_EQ(kv.token_bytes_drawn()[0].text, gpt2);

  // Two models compared (the Compare panel's Run; the panel itself closed):
  // the draft's line joins the model's.
  PrecisionPanel& panel = app.precision_panel();
  ASSERT_FALSE(app.last_frame().was_drawn(PanelId::kPrecision));
  panel.run_models(*app.controller().worker(), draft_dir(), "Today's weather is so", 2);
  wait_for_panel(app);
  ASSERT_EQ(panel.error(), "");
  ASSERT_EQ(kv.token_bytes_drawn().size(), 2u);
  EXPECT_EQ(kv.token_bytes_drawn()[0].text, gpt2);
  // The draft: 2 heads of 64 dims in 2 layers (its config.json).
  EXPECT_EQ(kv.token_bytes_drawn()[1].text,
            "tokenscope-tiny-draft: 2 (K, V) \u00D7 2 KV heads \u00D7 64 dims \u00D7 4 B = 1.0 "
            "KiB per token per layer, 2.0 KiB per token in 2 layers");
  EXPECT_EQ(kv.token_bytes_drawn()[1].per_token, 2048);

  // Two formats of one model: no second model, no second line.
  panel.run(*app.controller().worker(), {WeightFormat::kF32, WeightFormat::kBF16},
            "Today's weather is so", 2);
  wait_for_panel(app);
  ASSERT_EQ(panel.error(), "");
  EXPECT_EQ(kv.token_bytes_drawn().size(), 1u);
}

// A projector's large fonts at 720 and 1080 lines, then a small window: the
// panel stays inside, big enough to read (with the plot at projector sizes),
// and its table, the last thing a short panel keeps, still has every row.
void expect_readable(App& app) {
  app.load_model_blocking();
  app.settle();
  wait_for_panel(app);
  ASSERT_TRUE(app.precision_panel().result()) << app.precision_panel().error();
  const bool models = app.precision_panel().result()->models;
  for (const auto& [w, h] : {std::pair{1280, 720}, std::pair{1920, 1080}, std::pair{800, 600}}) {
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h));
    test::resize_window(app, w, h);
    app.state().layout_request = "formats";
    app.settle(3, 10);
    ASSERT_TRUE(app.window().presentation());
    expect_inside_window(app, static_cast<float>(w), static_cast<float>(h));
    const float font = ImGui::GetFontSize();
    const PanelBox& b = app.last_frame().boxes[static_cast<int>(PanelId::kPrecision)];
    if (w >= 1280) {
      EXPECT_GE(b.h, font * 8);
      EXPECT_GE(b.w, font * 18);
      EXPECT_EQ(app.precision_panel().drawn().plot_bars, kSteps + 1);
    }
    // Two models: each one's weight and KV bytes stay on screen.
    EXPECT_EQ(app.precision_panel().drawn().model_costs, models);
    EXPECT_EQ(app.precision_panel().drawn().table_rows, kSteps + 1);
    EXPECT_EQ(app.last_frame().gl_errors, 0);
  }
}

TEST(GuiPrecision, StaysReadableInPresentationModeAndWhenResized) {
  REQUIRE_DISPLAY();
  App app(precision_options({WeightFormat::kF32, WeightFormat::kQ8}, true));
  expect_readable(app);
}

TEST(GuiPrecision, TwoModelsStayReadableInPresentationMode) {
  REQUIRE_DISPLAY();
  App app(model_options(true));
  expect_readable(app);
}

// A run that fails (a model path that does not exist, long enough to run off
// an 800x600 window) says so in one line inside the panel, and the panel
// runs the next comparison as before.
TEST(GuiPrecision, AFailedRunIsOneLineInsideThePanelAndThePanelGoesOn) {
  REQUIRE_DISPLAY();
  App app(precision_options({WeightFormat::kF32, WeightFormat::kQ8}));
  ASSERT_NO_FATAL_FAILURE(open_and_run(app));
  test::resize_window(app, 800, 600);
  app.settle(3, 10);
  PrecisionPanel& panel = app.precision_panel();
  const fs::path missing = fs::path("/nonexistent") / std::string(120, 'm') / "model";
  panel.run_models(*app.controller().worker(), missing, "The cat sat on", 2);
  wait_for_panel(app);
  const std::string err = panel.error();
  ASSERT_NE(err, "");
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  const PanelBox& b = app.last_frame().boxes[static_cast<int>(PanelId::kPrecision)];
  EXPECT_GT(panel.drawn().error_x1, b.x);
  EXPECT_LE(panel.drawn().error_x1, b.x + b.w + 0.5f) << err;

  panel.run(*app.controller().worker(), {WeightFormat::kF32, WeightFormat::kBF16}, "The cat sat on",
            2);
  wait_for_panel(app);
  EXPECT_EQ(panel.error(), "");
  ASSERT_TRUE(panel.result());
  EXPECT_EQ(precision_pair_name(panel.result()->pair), "f32,bf16");
  EXPECT_EQ(panel.result()->steps.size(), 3u);
  EXPECT_EQ(panel.drawn().error_x1, 0.0f);
}

TEST(GuiPrecision, TheWindowFlagIsCheckedLikeTheCli) {
  const char* ok[] = {"tokenscope", "--compare-precision", "bf16,q4"};
  const AppOptions o = parse_app_options(3, ok);
  ASSERT_TRUE(o.compare_precision);
  EXPECT_EQ(precision_pair_name(*o.compare_precision), "bf16,q4");
  for (const char* bad : {"q8", "q8,q8", "f32,x"}) {
    const char* argv[] = {"tokenscope", "--compare-precision", bad};
    EXPECT_THROW(parse_app_options(3, argv), Error) << bad;
  }
  const char* cuda[] = {"tokenscope", "--compare-precision", "f32,q8", "--device", "cuda"};
  EXPECT_THROW(parse_app_options(5, cuda), Error);
  const char* weights[] = {"tokenscope", "--compare-precision", "f32,q8", "--weights", "q8"};
  EXPECT_THROW(parse_app_options(5, weights), Error);
  const char* model[] = {"tokenscope", "--compare-model", "some/model"};
  EXPECT_EQ(parse_app_options(3, model).compare_model, "some/model");
  const char* both[] = {"tokenscope", "--compare-model", "m", "--compare-precision", "f32,q8"};
  EXPECT_THROW(parse_app_options(5, both), Error);
}

}  // namespace
}  // namespace ts::app
