// The KV cache panel's words against the session's records: with the cache
// off it says what the viewed step ran and what the next one runs in the same
// numbers as the Transport panel; every row of blocks is named after the lane
// (and beam) that holds it, live and in a reopened session.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "app/app.h"
#include "app/panels/kv.h"
#include "app/view_model.h"
#include "gui_test_support.h"

namespace ts::app {
namespace {

namespace fs = std::filesystem;

TEST(GuiKvCache, CacheOffSaysWhatTheStepRanAndWhatTheNextRuns) {
  REQUIRE_DISPLAY();
  AppOptions o = test::fixture_options("classroom", "The cat sat on");
  o.strategy = "contrastive=4,alpha=0.6";  // 4 candidate sequences per step
  o.kv_cache = false;
  App app(o);
  app.load_model_blocking();
  app.settle();
  app.state().settings.panel_open(PanelId::kKvCache) = true;
  for (int i = 0; i < 3; ++i) {
    app.advance();
    app.settle(2, 100);
  }
  const SnapshotPtr snap = app.controller().snapshot();
  ASSERT_EQ(snap->history.size(), 3u);
  // Without the cache, decode step s feeds each of the 4 candidates whole:
  // the prompt, the s tokens chosen before it and the candidate itself.
  const int prompt = static_cast<int>(snap->prompt_tokens.size());
  const int ran = 4 * (prompt + 2 + 1);   // step 2, the one on screen
  const int next = 4 * (prompt + 3 + 1);  // step 3
  ASSERT_EQ(snap->history.back()->recomputed_tokens, ran);
  const std::string text = app.kv_cache_panel().cache_off_text();
  EXPECT_NE(text.find("This step ran " + std::to_string(ran) + " tokens."), std::string::npos)
      << text;
  EXPECT_NE(text.find(snap->next_action), std::string::npos) << text;
  EXPECT_NE(snap->next_action.find("recomputes " + std::to_string(next) +
                                   " tokens in all (lane 0: 4 candidates \u00D7 " +
                                   std::to_string(prompt + 4) + ")"),
            std::string::npos)
      << snap->next_action;
  app.advance();
  app.settle(2, 100);
  const SnapshotPtr after = app.controller().snapshot();
  ASSERT_EQ(after->history.size(), 4u);
  EXPECT_EQ(after->history.back()->recomputed_tokens, next);
  EXPECT_NE(app.kv_cache_panel().cache_off_text().find("This step ran " + std::to_string(next) +
                                                       " tokens."),
            std::string::npos)
      << app.kv_cache_panel().cache_off_text();
}

// One greedy lane and one of 3 beams, cache off: the next step's count is
// the total of every sequence it feeds whole, and the step then runs it.
TEST(GuiKvCache, CacheOffNextCountIsEverySequenceOfEveryLane) {
  REQUIRE_DISPLAY();
  AppOptions o = test::fixture_options("classroom", "The cat sat on");
  o.compare = {"greedy", "beams=3"};
  o.kv_cache = false;
  App app(o);
  app.load_model_blocking();
  app.settle();
  constexpr int kHistory = 4;  // prefill + decode steps 1 to 3
  for (int i = 0; i < kHistory; ++i) {
    app.advance();
    app.settle(2, 100);
  }
  const SnapshotPtr snap = app.controller().snapshot();
  ASSERT_EQ(snap->history.size(), static_cast<size_t>(kHistory));
  ASSERT_EQ(snap->state, SessionState::kPaused);
  ASSERT_EQ(snap->lanes[1].beams->beams.size(), 3u);
  // Decode step s feeds a sequence of the prompt and the s tokens chosen
  // before it: the greedy lane's and each of the 3 beams'.
  const int prompt = static_cast<int>(snap->prompt_tokens.size());
  const int each = prompt + kHistory;
  EXPECT_EQ(snap->next_action, "decode step 4: KV cache off, recomputes " +
                                   std::to_string(4 * each) +
                                   " tokens in all (lane 0: " + std::to_string(each) +
                                   "; lane 1: 3 beams \u00D7 " + std::to_string(each) + ")");
  app.advance();
  app.settle(2, 100);
  const SnapshotPtr after = app.controller().snapshot();
  ASSERT_EQ(after->history.size(), static_cast<size_t>(kHistory + 1));
  EXPECT_EQ(after->history.back()->recomputed_tokens, 4 * each);
}

// The KV cache panel's row names after each step, sorted.
std::vector<std::string> labels_at(App& app, int step) {
  app.state().view_step = step;
  app.settle(2, 50);
  std::vector<std::string> labels = app.kv_cache_panel().sequence_labels();
  std::sort(labels.begin(), labels.end());
  return labels;
}

// Every row of blocks is named after the lane and beam that held it after
// the viewed step: at the newest step, at older ones (whose beams have been
// forked again since) and in the re-opened session, which holds no live
// sequence at all.
TEST(GuiKvCache, EverySequenceIsNamedAfterItsLaneAndBeamAtEveryStep) {
  REQUIRE_DISPLAY();
  const fs::path file =
      fs::temp_directory_path() / ("ts-kv-owners-" + std::to_string(getpid()) + ".json");
  constexpr int kSteps = 4;  // prefill + 3 decode steps
  // The prefill forks one sequence per beam; every step keeps 3 open beams.
  const std::vector<std::string> expected = {"lane 0", "lane 1 beam 0", "lane 1 beam 1",
                                             "lane 1 beam 2"};
  {
    AppOptions o = test::fixture_options("kv", "The cat sat on");
    o.compare = {"greedy", "beams=3"};
    App app(o);
    app.load_model_blocking();
    app.settle();
    for (int i = 0; i < kSteps; ++i) {
      app.advance();
      app.settle(2, 100);
    }
    const SnapshotPtr snap = app.controller().snapshot();
    ASSERT_EQ(snap->history.size(), static_cast<size_t>(kSteps));
    ASSERT_EQ(snap->state, SessionState::kPaused);
    for (int s = kSteps - 1; s >= 0; --s) EXPECT_EQ(labels_at(app, s), expected) << "step " << s;
    app.controller().analysis()->export_json(*app.controller().worker(), file.string());
    app.controller().worker()->wait_idle();
    ASSERT_EQ(app.controller().analysis()->export_message(), "wrote " + file.string());
  }
  AppOptions bare = test::fixture_options("kv");
  bare.setup = {};
  App app(bare);
  app.frame();
  app.open_session(file);
  app.settle();
  for (int i = 1; i < kSteps; ++i) {
    app.advance();
    app.settle(2, 50);
  }
  ASSERT_EQ(app.controller().snapshot()->history.size(), static_cast<size_t>(kSteps));
  for (int s = kSteps - 1; s >= 0; --s)
    EXPECT_EQ(labels_at(app, s), expected) << "re-opened, step " << s;
  fs::remove(file);
}

// Each open beam feeds its newest token at every decode step: the step's
// written slots are one for the greedy lane and one for each of the 3 beams,
// not the best beam's alone.
TEST(GuiKvCache, ABeamStepWroteOneSlotForEveryOpenBeam) {
  REQUIRE_DISPLAY();
  AppOptions o = test::fixture_options("kv", "The cat sat on");
  o.compare = {"greedy", "beams=3"};
  App app(o);
  app.load_model_blocking();
  app.settle();
  constexpr int kSteps = 4;  // prefill + 3 decode steps
  for (int i = 0; i < kSteps; ++i) {
    app.advance();
    app.settle(2, 100);
  }
  const SnapshotPtr snap = app.controller().snapshot();
  ASSERT_EQ(snap->history.size(), static_cast<size_t>(kSteps));
  for (int s = 1; s < kSteps; ++s) {
    ASSERT_EQ(snap->history[s]->lanes[1].beam->before->beams.size(), 3u) << "step " << s;
    EXPECT_EQ(written_slots(make_step_view(*snap, s, 0)).size(), 1u + 3u) << "step " << s;
  }
}

// The cache on/off comparison's wall times: one decode step slowed by a busy
// machine that makes the cached run look slower is named; the same totals
// without it, or an outlier that leaves the order as it is, are not.
TEST(GuiKvCache, ABusyStepThatTurnsTheTotalsRoundIsNamed) {
  const std::vector<double> off = {0.1, 0.02, 0.03, 0.04, 0.05};
  EXPECT_EQ(timing_outlier_reversing({0.1, 0.01, 0.01, 0.01, 0.01}, off), -1);
  // Step 2 of the cached run took a second: the totals say "without" is faster.
  EXPECT_EQ(timing_outlier_reversing({0.1, 0.01, 1.0, 0.01, 0.01}, off), 2);
  // Slow, but the cached run is still the faster one: nothing to warn about.
  EXPECT_EQ(timing_outlier_reversing({0.1, 0.01, 0.05, 0.01, 0.01}, off), -1);
  // A slow prefill on one side only.
  EXPECT_EQ(timing_outlier_reversing({2.0, 0.01, 0.01, 0.01, 0.01}, off), 0);
  EXPECT_EQ(timing_outlier_reversing({}, {}), -1);
}

}  // namespace
}  // namespace ts::app
