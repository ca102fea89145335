// The KV cache panel's words against the session's records: with the cache
// off it says what the viewed step ran and what the next one runs in the same
// numbers as the Transport panel; every row of blocks is named after the lane
// (and beam) that holds it, live and in a reopened session.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <regex>
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
  const std::string text = app.kv_cache_panel().cache_off_text();
  const int ran = snap->history.back()->recomputed_tokens;
  EXPECT_NE(text.find("This step ran " + std::to_string(ran) + " tokens."), std::string::npos)
      << text;
  EXPECT_NE(text.find(snap->next_action), std::string::npos) << text;
  // The next step's count is right: each of the 4 candidates runs that many.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(snap->next_action, m, std::regex("recomputes all (\\d+) tokens")))
      << snap->next_action;
  const int next = std::stoi(m[1]);
  app.advance();
  app.settle(2, 100);
  const SnapshotPtr after = app.controller().snapshot();
  ASSERT_EQ(after->history.size(), 4u);
  EXPECT_EQ(after->history.back()->recomputed_tokens, 4 * next);
  // No number of the panel is another one: every count it gives is the step's or the next's.
  const std::string now = app.kv_cache_panel().cache_off_text();
  const std::regex count("(\\d+) tokens");
  for (std::sregex_iterator it(now.begin(), now.end(), count), end; it != end; ++it) {
    const int n = std::stoi((*it)[1]);
    EXPECT_TRUE(n == after->history.back()->recomputed_tokens || n == next + 1) << now;
  }
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
