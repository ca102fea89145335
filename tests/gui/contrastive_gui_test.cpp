// GUI tests of contrastive lanes: the Choosing panel's candidate table and
// its alpha slider (re-ranking from the recorded p and penalties, nothing
// recomputed), and the Lanes panel's line for a contrastive lane.
// Run:  xvfb-run -a -s "-screen 0 1920x1080x24 -noreset" build-gui/ts_gui_tests
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "app/app.h"
#include "app/panels/lanes.h"
#include "app/render/window.h"
#include "app/view_model.h"
#include "gui_test_support.h"

namespace ts::app {
namespace {

AppOptions options() {
  AppOptions o = test::fixture_options("classroom");
  o.compare = {"greedy", "contrastive=4,alpha=0.6"};
  return o;
}

void step(App& app) {
  app.frame();
  app.advance();
  app.settle(2, 100);
}

TEST(GuiContrastive, ChoosingPanelRanksTheRecordedCandidatesAndTheSliderReRanks) {
  REQUIRE_DISPLAY();
  App app(options());
  app.load_model_blocking();
  app.settle();
  for (int i = 0; i < 4; ++i) step(app);  // prefill + 3 decode steps
  select_lane(app.state(), app.controller().snapshot().get(), 1);
  app.settle(2, 50);
  const SnapshotPtr s = app.controller().snapshot();
  ASSERT_EQ(s->lanes.size(), 2u);
  ASSERT_TRUE(s->lanes[1].contrastive());
  const LaneStep* rec = lane_record(*s, static_cast<int>(s->history.size()) - 1, 1);
  ASSERT_TRUE(rec && rec->contrastive);
  const ContrastiveStep& cs = *rec->contrastive;
  const SamplingPanel& panel = app.sampling_panel();
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kSampling));

  // At the lane's own alpha: the lane's choice and the recorded scores.
  EXPECT_FLOAT_EQ(panel.contrastive_alpha(), 0.6f);
  EXPECT_EQ(panel.contrastive_winner(), cs.chosen);
  EXPECT_EQ(panel.headline(),
            "contrastive \u2192 \u201C" + token_piece(*s, rec->chosen_token) + "\u201D");
  ASSERT_EQ(panel.contrastive_scores().size(), cs.candidates.size());
  for (size_t i = 0; i < cs.candidates.size(); ++i)
    EXPECT_NEAR(panel.contrastive_scores()[i], cs.candidates[i].score, 1e-6);

  // alpha 0: the most probable candidate, scores = p. alpha 1: the least
  // similar one, scores = -penalty.
  app.sampling_panel().set_contrastive_alpha(0.0f);
  app.settle(2, 10);
  EXPECT_EQ(panel.contrastive_winner(), 0);
  for (size_t i = 0; i < cs.candidates.size(); ++i)
    EXPECT_NEAR(panel.contrastive_scores()[i], cs.candidates[i].prob, 1e-6);
  app.sampling_panel().set_contrastive_alpha(1.0f);
  app.settle(2, 10);
  int least_similar = 0;
  for (int i = 1; i < cs.k; ++i)
    if (cs.candidates[i].penalty < cs.candidates[least_similar].penalty) least_similar = i;
  EXPECT_EQ(panel.contrastive_winner(), least_similar);
  EXPECT_EQ(panel.headline(), "contrastive \u2192 \u201C" +
                                  token_piece(*s, cs.candidates[least_similar].token) + "\u201D");

  // Re-ranking computed nothing: the session is the same snapshot.
  EXPECT_EQ(app.controller().snapshot()->history.size(), s->history.size());
  EXPECT_EQ(app.controller().snapshot()->lanes[1].generated, s->lanes[1].generated);

  // The next step on show resets the slider to the lane's alpha.
  step(app);
  EXPECT_FLOAT_EQ(panel.contrastive_alpha(), 0.6f);
  const SnapshotPtr after = app.controller().snapshot();
  const LaneStep* next = lane_record(*after, static_cast<int>(after->history.size()) - 1, 1);
  ASSERT_TRUE(next && next->contrastive);
  EXPECT_EQ(panel.contrastive_winner(), next->contrastive->chosen);
}

TEST(GuiContrastive, LanesPanelSaysHowAContrastiveLaneChose) {
  REQUIRE_DISPLAY();
  App app(options());
  app.load_model_blocking();
  app.settle();
  app.state().settings.panel_open(PanelId::kLanes) = true;
  for (int i = 0; i < 3; ++i) step(app);
  const SnapshotPtr s = app.controller().snapshot();
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kLanes));
  const LaneStep* rec = lane_record(*s, 2, 1);
  ASSERT_TRUE(rec && rec->contrastive);
  char want[64];
  std::snprintf(want, sizeof want, "best score of 4, penalty %.2f",
                rec->contrastive->candidates[rec->contrastive->chosen].penalty);
  EXPECT_EQ(stage_line(*s, *rec), want);
  EXPECT_EQ(stage_line(*s, *lane_record(*s, 2, 0)).rfind("argmax of", 0), 0u);
}

}  // namespace
}  // namespace ts::app
