// The "Score a text" panel under Xvfb: the cells it draws carry the scoring
// function's probabilities, which are the model's (recomputed here from the
// logits of an independent prefill), in the colour map's colours, on screen.
#include <gtest/gtest.h>

#include <stb_image.h>
#include <unistd.h>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "app/app.h"
#include "app/render/window.h"
#include "gui_test_support.h"
#include "session/model_setup.h"
#include "session/score.h"

namespace ts::app {
namespace {

using test::fixture_model;

AppOptions options() { return test::fixture_options("score"); }

// Probability of token `id` under row `row` of all-position logits, in long double.
double model_probability(const std::vector<float>& logits, int vocab, int row, int id) {
  const float* r = logits.data() + static_cast<size_t>(row) * vocab;
  long double mx = r[0], sum = 0;
  for (int j = 0; j < vocab; ++j) mx = std::max(mx, static_cast<long double>(r[j]));
  for (int j = 0; j < vocab; ++j) sum += std::exp(static_cast<long double>(r[j]) - mx);
  return static_cast<double>(std::exp(static_cast<long double>(r[id]) - mx) / sum);
}

TEST(GuiScore, CellsShowTheModelsProbabilitiesInTheColourMap) {
  REQUIRE_DISPLAY();
  App app(options());
  app.load_model_blocking();
  app.settle();
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kScore));
  ScorePanel& panel = app.score_panel();
  // Opened for the first time, it scores an example after the session's prompt.
  ASSERT_TRUE(panel.result(0)) << panel.error();
  EXPECT_EQ(panel.result(0)->prompt, "Today's weather is so");

  const std::string prompt = "The cat sat on", a = " the mat.", b = " the idea.";
  panel.score(*app.controller().worker(), prompt, a, b);
  app.settle();
  ASSERT_EQ(panel.error(), "");
  ASSERT_FALSE(panel.busy());

  // Independently: the scoring function, and the model's logits from a prefill here.
  ModelSetupOptions so;
  so.model = fixture_model();
  so.device = "cpu";
  so.cpu_threads = 2;
  LoadedModel m = load_model_setup(so);
  const int vocab = m.engine->config().vocab_size;
  const ScoreResult expected[2] = {score_text(*m.engine, *m.tokenizer, prompt, a),
                                   score_text(*m.engine, *m.tokenizer, prompt, b)};
  size_t cells = 0;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tokenscope-gui-score-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string png = (dir / "window.png").string();
  app.write_screenshot(png);
  int w = 0, h = 0, n = 0;
  unsigned char* px = stbi_load(png.c_str(), &w, &h, &n, 4);
  ASSERT_NE(px, nullptr);
  for (int col = 0; col < 2; ++col) {
    const ScoreResult& e = expected[col];
    ForwardOptions fo;
    fo.all_logits = true;
    const ForwardResult f = m.engine->forward_scratch(e.tokens, fo);
    for (const ScorePanel::Cell& c : panel.cells()) {
      if (c.column != col) continue;
      ++cells;
      ASSERT_LT(c.index, static_cast<int>(e.scored.size()));
      const ScoredToken& t = e.scored[c.index];
      SCOPED_TRACE("column " + std::to_string(col) + " token " + std::to_string(c.index));
      EXPECT_EQ(c.token, t.id);
      EXPECT_NEAR(c.probability, t.probability, 1e-12);
      EXPECT_NEAR(c.probability,
                  model_probability(f.outputs[0].logits, vocab, t.position - 1, t.id), 1e-5);
      const Rgb8 want = colorize(static_cast<float>(t.probability), app.state().settings.colormap,
                                 ScorePanel::color_range());
      EXPECT_EQ(c.colour, want);
      // On screen: a pixel inside the cell, left of its text.
      const int x = static_cast<int>(c.x0) + 1, y = static_cast<int>((c.y0 + c.y1) / 2);
      ASSERT_TRUE(x >= 0 && x < w && y >= 0 && y < h);
      const unsigned char* p = px + (static_cast<size_t>(y) * w + x) * 4;
      EXPECT_NEAR(p[0], want.r, 2);
      EXPECT_NEAR(p[1], want.g, 2);
      EXPECT_NEAR(p[2], want.b, 2);
    }
  }
  stbi_image_free(px);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(cells, expected[0].scored.size() + expected[1].scored.size());

  // A text longer than the context: one line, and the results of the text
  // before are gone (they are not this text's).
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += " the cat";
  panel.score(*app.controller().worker(), prompt, long_text, "");
  app.settle();
  EXPECT_NE(panel.error().find("longer than the model's context"), std::string::npos)
      << panel.error();
  EXPECT_EQ(panel.error().find('\n'), std::string::npos);
  EXPECT_EQ(panel.result(0), nullptr);
  EXPECT_EQ(panel.result(1), nullptr);
  EXPECT_TRUE(panel.cells().empty());
  // A second continuation that is too long: the first, scored now, shows alone.
  panel.score(*app.controller().worker(), prompt, a, long_text);
  app.settle();
  EXPECT_EQ(panel.error().rfind("continuation 2: ", 0), 0u) << panel.error();
  ASSERT_NE(panel.result(0), nullptr);
  EXPECT_EQ(panel.result(0)->continuation, a);
  EXPECT_EQ(panel.result(1), nullptr);
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

}  // namespace
}  // namespace ts::app
