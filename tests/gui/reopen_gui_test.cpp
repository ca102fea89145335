// GUI tests of re-opening a session: a session exported from a live run,
// opened in a fresh window without the model, stepped forward and back,
// shows the same step records in the panels as the live run did; a file it
// cannot read leaves the window's session as it was.
// Run:  xvfb-run -a -s "-screen 0 1920x1080x24 -noreset" build-gui/ts_gui_tests
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "app/app.h"
#include "app/attention_data.h"
#include "app/panels/lanes.h"
#include "app/panels/lookahead.h"
#include "app/panels/spec.h"
#include "app/panels/timeline.h"
#include "app/panels/transport.h"
#include "app/view_model.h"
#include "gui_test_support.h"
#include "util/error.h"

namespace ts::app {
namespace {

namespace fs = std::filesystem;

// What the panels showed for one step of one lane.
struct Shown {
  std::vector<int> tokens;       // the Prompt panel's tokens (view)
  int chosen = -1;               // the record's token
  std::string logits_heading;    // Logits panel
  std::string choosing;          // Choosing panel's headline
  std::vector<int> stage_kept;   // Choosing panel's stages
  int drawn = -1;                // the draw's token
  std::vector<float> attention;  // Attention panel's matrix
  int attention_n = 0;
  int kv_blocks_used = -1;  // KV cache after the step
};

Shown shown(App& app) {
  Shown s;
  const SnapshotPtr snap = app.controller().snapshot();
  const StepView v = make_step_view(*snap, app.state().view_step, app.state().lane);
  s.tokens = v.tokens;
  s.chosen = v.record ? v.record->chosen_token : -1;
  s.kv_blocks_used = v.trace ? v.trace->kv_after.blocks_used : -1;
  s.logits_heading = app.logits_panel().heading();
  s.choosing = app.sampling_panel().headline();
  if (const auto& rec = app.sampling_panel().record()) {
    for (const StageRecord& st : rec->stages) s.stage_kept.push_back(st.kept);
    s.drawn = rec->draw.chosen_token;
  }
  const AttentionMatrix& m = app.attention_panel().matrix();
  EXPECT_TRUE(m.complete);
  s.attention = m.values;
  s.attention_n = m.n;
  return s;
}

void expect_same(const Shown& live, const Shown& got) {
  EXPECT_EQ(live.tokens, got.tokens);
  EXPECT_EQ(live.chosen, got.chosen);
  EXPECT_EQ(live.logits_heading, got.logits_heading);
  EXPECT_EQ(live.choosing, got.choosing);
  EXPECT_EQ(live.stage_kept, got.stage_kept);
  EXPECT_EQ(live.drawn, got.drawn);
  EXPECT_EQ(live.kv_blocks_used, got.kv_blocks_used);
  ASSERT_EQ(live.attention_n, got.attention_n);
  ASSERT_EQ(live.attention.size(), got.attention.size());
  // Stored as half floats: within 2^-11 relative, 2^-25 absolute.
  for (size_t i = 0; i < live.attention.size(); ++i)
    ASSERT_LE(std::fabs(live.attention[i] - got.attention[i]),
              std::max(std::fabs(live.attention[i]) * 0x1p-11f, 0x1p-25f))
        << "cell " << i;
}

AppOptions live_options() {
  AppOptions o = test::fixture_options("classroom", "The cat sat on the mat.");
  o.compare = {"greedy", "top_p=0.9,temperature=0.8,seed=3"};
  return o;
}

// A fresh window with no model: what --open starts from.
AppOptions bare_options() {
  AppOptions o = test::fixture_options("classroom");
  o.setup = {};
  return o;
}

void view(App& app, int step, int lane) {
  app.state().view_step = step;
  select_lane(app.state(), app.controller().snapshot().get(), lane);
  app.state().view_step = step;
  app.settle(2, 50);
}

// Loads the live model and runs `steps` steps (the first is the prefill),
// calling each(i) after step i.
void load_and_step(App& app, int steps, const std::function<void(int)>& each = {}) {
  app.load_model_blocking();
  app.settle();
  for (int i = 0; i < steps; ++i) {
    app.frame();
    app.advance();
    app.settle(2, 100);
    if (each) each(i);
  }
}

TEST(GuiReopen, ExportedSessionShowsTheSameRecordsSteppingBothWays) {
  REQUIRE_DISPLAY();
  const fs::path file =
      fs::temp_directory_path() / ("ts-reopen-" + std::to_string(getpid()) + ".json");
  constexpr int kSteps = 5;  // prefill + 4 decode steps
  constexpr int kLanes = 2;
  std::vector<std::vector<Shown>> live(kSteps, std::vector<Shown>(kLanes));
  {
    App app(live_options());
    load_and_step(app, kSteps);
    ASSERT_EQ(app.controller().snapshot()->history.size(), static_cast<size_t>(kSteps));
    for (int s = 0; s < kSteps; ++s)
      for (int l = 0; l < kLanes; ++l) {
        view(app, s, l);
        live[s][l] = shown(app);
        // Something to compare: each panel drew this step's record.
        ASSERT_GE(live[s][l].chosen, 0);
        ASSERT_FALSE(live[s][l].stage_kept.empty());
        ASSERT_FALSE(live[s][l].choosing.empty());
        ASSERT_FALSE(live[s][l].logits_heading.empty());
        ASSERT_GT(live[s][l].attention_n, 0);
      }
    // File > Export session (what the menu's Export button calls).
    app.controller().analysis()->export_json(*app.controller().worker(), file.string());
    app.controller().worker()->wait_idle();
    ASSERT_EQ(app.controller().analysis()->export_message(), "wrote " + file.string());
  }

  App app(bare_options());
  app.frame();
  ASSERT_EQ(app.controller().snapshot(), nullptr);
  app.open_session(file);
  app.settle();
  ASSERT_TRUE(app.controller().replaying());
  EXPECT_EQ(app.controller().worker(), nullptr);
  // It opens at the prefill; Space / Right step forward, Left back.
  auto check = [&](int step) {
    const SnapshotPtr snap = app.controller().snapshot();
    ASSERT_EQ(snap->history.size(), static_cast<size_t>(step + 1));
    for (int l = 0; l < kLanes; ++l) {
      SCOPED_TRACE("step " + std::to_string(step) + ", lane " + std::to_string(l));
      view(app, -1, l);
      expect_same(live[step][l], shown(app));
    }
  };
  check(0);
  for (int s = 1; s < kSteps; ++s) {
    app.advance();
    app.settle(2, 50);
    check(s);
  }
  // Past the end: nothing changes (the replay has finished).
  app.advance();
  app.settle(2, 20);
  EXPECT_EQ(app.controller().snapshot()->history.size(), static_cast<size_t>(kSteps));
  for (int s = kSteps - 2; s >= 1; --s) {
    app.back();
    app.settle(2, 50);
    check(s);
  }
  app.back();
  app.back();
  app.settle(2, 20);
  EXPECT_EQ(app.controller().snapshot()->state, SessionState::kReady);  // before prefill
  app.advance();
  app.settle(2, 50);
  check(0);

  // The recorded choices used no banned-words list: the box is off.
  EXPECT_FALSE(app.controller().banned_words_on());

  // What needs the model says so, and changes nothing.
  const SnapshotPtr before = app.controller().snapshot();
  app.controller().choose_with(0, parse_strategy("top_k=3,seed=1"));
  EXPECT_NE(app.controller().error().find("needs the model"), std::string::npos)
      << app.controller().error();
  EXPECT_NE(app.controller().needs_model_line().find(file.string()), std::string::npos);
  EXPECT_EQ(app.controller().snapshot(), before);
  fs::remove(file);
}

// A reopened session's Prompt panel counts the tokens the file recorded (its
// tokenizer has no merges: encoding the text again would count bytes), so a
// prompt that fitted the model is not flagged as too long; the end of the
// recording is a finished state with Step disabled, not an error.
TEST(GuiReopen, ThePromptCountsItsRecordedTokensAndTheEndIsFinished) {
  REQUIRE_DISPLAY();
  const fs::path file =
      fs::temp_directory_path() / ("ts-reopen-count-" + std::to_string(getpid()) + ".json");
  const std::string prompt =
      "The cat sat on the mat. The dog sat on the log. The bird sat on the tree.";
  size_t live_tokens = 0;
  int n_ctx = 0;
  {
    AppOptions o = test::fixture_options("classroom", prompt);
    App app(o);
    app.load_model_blocking();
    app.settle();
    for (int i = 0; i < 3; ++i) {
      app.advance();
      app.settle(2, 100);
    }
    const SnapshotPtr snap = app.controller().snapshot();
    ASSERT_EQ(snap->history.size(), 3u);
    ASSERT_EQ(snap->state, SessionState::kPaused);
    live_tokens = snap->prompt_tokens.size();
    n_ctx = snap->config.n_ctx;
    // Fewer tokens than the context holds, more characters.
    ASSERT_LT(live_tokens, static_cast<size_t>(n_ctx));
    ASSERT_GT(prompt.size(), static_cast<size_t>(n_ctx));
    EXPECT_EQ(app.prompt_panel().token_count(), static_cast<int>(live_tokens));
    app.controller().analysis()->export_json(*app.controller().worker(), file.string());
    app.controller().worker()->wait_idle();
    ASSERT_EQ(app.controller().analysis()->export_message(), "wrote " + file.string());
  }
  App app(bare_options());
  app.frame();
  app.open_session(file);
  app.settle();
  ASSERT_TRUE(app.controller().replaying());
  ASSERT_EQ(app.state().prompt_edit, prompt);
  EXPECT_EQ(app.prompt_panel().token_count(), static_cast<int>(live_tokens));
  EXPECT_EQ(app.prompt_panel().over_context(), "");
  // Step to the end of the recording: finished, nothing to step, no error.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(app.controller().snapshot()->state, SessionState::kPaused);
    app.advance();
    app.settle(2, 50);
  }
  const SnapshotPtr end = app.controller().snapshot();
  ASSERT_EQ(end->history.size(), 3u);
  EXPECT_EQ(end->state, SessionState::kFinished);
  EXPECT_EQ(TransportPanel::where_text(*end), "Finished");
  EXPECT_EQ(end->next_action, "the end of the recorded session (step 3 of 3)");
  app.advance();  // Space at the end: nothing happens, and no error is shown
  app.settle(2, 20);
  EXPECT_EQ(app.controller().error(), "");
  EXPECT_EQ(app.state().error_text, "");
  EXPECT_EQ(app.controller().snapshot()->history.size(), 3u);
  // Back leaves the end: stepping is possible again.
  app.back();
  app.settle(2, 20);
  EXPECT_EQ(app.controller().snapshot()->state, SessionState::kPaused);
  fs::remove(file);
}

// What the Speculative decoding panel showed for one round.
struct ShownRound {
  bool has_round = false;
  int gamma = 0, accepted = 0, next_token = -1;
  std::vector<int> drafts;
  std::vector<int> lane_tokens;  // the lane's generated tokens then
  bool operator==(const ShownRound&) const = default;
};

// The newest step of `lane`, as the panel shows it.
ShownRound shown_round(App& app, int lane) {
  view(app, -1, lane);
  const SpecPanelView& v = app.speculative_panel().view();
  ShownRound r;
  r.has_round = v.has_round;
  r.gamma = v.gamma;
  r.accepted = v.accepted;
  r.next_token = v.next_token;
  for (const SpecPanelView::Row& row : v.rows) r.drafts.push_back(row.token);
  r.lane_tokens = app.controller().snapshot()->lanes[lane].generated;
  return r;
}

// A session with a speculative and a DoLa lane re-opens: the Speculative
// decoding panel shows each recorded round as the live run did, and every
// lane keeps its strategy.
TEST(GuiReopen, SpeculativeAndDolaLanesReopen) {
  REQUIRE_DISPLAY();
  const fs::path file =
      fs::temp_directory_path() / ("ts-reopen-spec-" + std::to_string(getpid()) + ".json");
  constexpr int kSteps = 3;  // prefill + 2 rounds
  constexpr int kSpecLane = 1;
  std::vector<ShownRound> live(kSteps);
  std::vector<std::string> strategies;
  {
    AppOptions o = test::fixture_options("speculative", "The cat sat on the mat.");
    o.compare = {"greedy", "spec=2", "dola=1"};
    o.draft_model = test::fixture_model();  // the target itself: its own KV cache
    App app(o);
    load_and_step(app, kSteps, [&](int i) { live[i] = shown_round(app, kSpecLane); });
    const SnapshotPtr snap = app.controller().snapshot();
    ASSERT_EQ(snap->history.size(), static_cast<size_t>(kSteps));
    for (const Lane& l : snap->lanes) strategies.push_back(format_strategy(l.params));
    ASSERT_TRUE(live[1].has_round);
    ASSERT_GT(live[1].gamma, 0);
    app.controller().analysis()->export_json(*app.controller().worker(), file.string());
    app.controller().worker()->wait_idle();
    ASSERT_EQ(app.controller().analysis()->export_message(), "wrote " + file.string());
  }
  AppOptions bare = test::fixture_options("speculative");
  bare.setup = {};
  App app(bare);
  app.frame();
  app.open_session(file);
  app.settle();
  ASSERT_TRUE(app.controller().replaying());
  for (int s = 1; s < kSteps; ++s) {
    app.advance();
    app.settle(2, 50);
  }
  const SnapshotPtr snap = app.controller().snapshot();
  ASSERT_EQ(snap->history.size(), static_cast<size_t>(kSteps));
  std::vector<std::string> got;
  for (const Lane& l : snap->lanes) got.push_back(format_strategy(l.params));
  EXPECT_EQ(got, strategies);
  const LaneStep* dola = lane_record(*snap, kSteps - 1, 2);
  ASSERT_NE(dola, nullptr);
  EXPECT_NE(dola->dola, nullptr);
  for (int s = kSteps - 1; s >= 0; --s) {
    SCOPED_TRACE("step " + std::to_string(s));
    EXPECT_TRUE(shown_round(app, kSpecLane) == live[s]);
    if (s > 0) {
      app.back();
      app.settle(2, 50);
    }
  }
  fs::remove(file);
}

// What the Lookahead panel and the Attention panel showed for one pass.
struct ShownPass {
  bool has_pass = false;
  bool prompt_lookup = false;
  std::vector<std::string> window_cells, window_next, committed;
  std::vector<uint8_t> window_changed;
  std::vector<std::vector<int>> candidates;
  std::vector<int> agree;
  int accepted_candidate = -1, matched = 0, model_token = -1, fed = 0;
  int pool_size = 0, new_ngrams = 0;
  double seconds = 0;
  int passes = 0, passes_committed = 0;
  int row_token = -1, row_position = 0;
  std::vector<int> row_sees;
  // Attention: the positions' tokens, the pass's rows and mask.
  int attention_n = 0, pass_rows = 0;
  std::vector<int> attention_tokens;
  std::vector<uint8_t> pass_mask;
  std::vector<int> lane_tokens;  // the lane's generated tokens then
  bool operator==(const ShownPass&) const = default;
};

// The newest step of `lane`, as the Lookahead and Attention panels show it
// (the row stepper on the pass's last fed row).
ShownPass shown_pass(App& app, int lane) {
  app.lookahead_panel().select_row(1000);
  view(app, -1, lane);
  for (int i = 0; i < 200 && !app.attention_panel().settled(); ++i) app.settle(1, 2);
  const LookaheadPanelView& v = app.lookahead_panel().view();
  ShownPass r;
  r.has_pass = v.has_pass;
  r.prompt_lookup = v.prompt_lookup;
  r.window_cells = v.window_cells;
  r.window_next = v.window_next;
  r.committed = v.committed;
  r.window_changed = v.window_changed;
  for (const auto& c : v.candidates) {
    r.candidates.push_back(c.tokens);
    r.agree.push_back(c.agree);
  }
  r.accepted_candidate = v.accepted_candidate;
  r.matched = v.matched;
  r.model_token = v.model_token;
  r.fed = v.fed;
  r.pool_size = v.pool_size;
  r.new_ngrams = v.new_ngrams;
  r.seconds = v.seconds;
  r.passes = v.totals.passes;
  r.passes_committed = v.totals.committed;
  r.row_token = v.row_token;
  r.row_position = v.row_position;
  r.row_sees = v.row_sees;
  const AttentionMatrix& m = app.attention_panel().matrix();
  EXPECT_TRUE(m.complete);
  r.attention_n = m.n;
  r.pass_rows = m.pass_rows;
  r.attention_tokens = m.tokens;
  r.pass_mask = m.pass_mask;
  r.lane_tokens = app.controller().snapshot()->lanes[lane].generated;
  return r;
}

// The Timeline's passes chart and each step's tooltip line.
struct ShownTimeline {
  std::vector<std::vector<double>> passes;
  std::vector<std::string> notes;
  bool operator==(const ShownTimeline&) const = default;
};

ShownTimeline shown_timeline(App& app) {
  app.settle(2, 4);
  ShownTimeline t;
  for (const ChartSeries& c : app.timeline_panel().pass_series()) t.passes.push_back(c.values);
  t.notes = app.timeline_panel().notes();
  return t;
}

// After the first frame, which applies the layout.
void open_pass_panels(App& app) {
  app.frame();
  app.state().settings.panel_open(PanelId::kLookahead) = true;
  app.state().settings.panel_open(PanelId::kTimeline) = true;
  app.state().settings.panel_open(PanelId::kAttention) = true;
}

// A session with a lookahead and a prompt-lookup lane re-opens: stepping
// through it, the Lookahead panel, the Attention panel's pass rows and mask
// and the Timeline's passes chart show each recorded pass as the live run
// did, and every lane keeps its strategy.
TEST(GuiReopen, LookaheadAndPromptLookupLanesReopen) {
  REQUIRE_DISPLAY();
  const fs::path file =
      fs::temp_directory_path() / ("ts-reopen-lookahead-" + std::to_string(getpid()) + ".json");
  constexpr int kSteps = 4;  // prefill + 3 passes
  const std::vector<int> pass_lanes = {1, 2};
  std::vector<std::vector<ShownPass>> live(kSteps, std::vector<ShownPass>(3));
  std::vector<std::string> strategies;
  ShownTimeline live_timeline;
  {
    AppOptions o = test::fixture_options("lookahead", "I'm not sure I'm not sure I'm not sure");
    o.setup.model.clear();  // the bundled model: its loop gives multi-token passes
    o.compare = {"greedy", "lookahead", "prompt_lookup"};
    App app(o);
    open_pass_panels(app);
    load_and_step(app, kSteps, [&](int i) {
      for (int l : pass_lanes) live[i][l] = shown_pass(app, l);
    });
    const SnapshotPtr snap = app.controller().snapshot();
    ASSERT_EQ(snap->history.size(), static_cast<size_t>(kSteps));
    for (const Lane& l : snap->lanes) strategies.push_back(format_strategy(l.params));
    ASSERT_FALSE(live[0][1].has_pass);  // the prefill feeds the prompt only
    for (int s = 1; s < kSteps; ++s)
      for (int l : pass_lanes) ASSERT_TRUE(live[s][l].has_pass) << "step " << s << " lane " << l;
    ASSERT_GT(live[kSteps - 1][1].pass_rows, 1);
    live_timeline = shown_timeline(app);
    ASSERT_FALSE(live_timeline.passes.empty());
    app.controller().analysis()->export_json(*app.controller().worker(), file.string());
    app.controller().worker()->wait_idle();
    // Nothing the file cannot re-open: no note beside "wrote FILE".
    ASSERT_EQ(app.controller().analysis()->export_message(), "wrote " + file.string());
  }
  AppOptions bare = test::fixture_options("lookahead");
  bare.setup = {};
  App app(bare);
  open_pass_panels(app);
  app.open_session(file);
  app.settle();
  ASSERT_TRUE(app.controller().replaying()) << app.state().error_text;
  std::vector<std::string> got;
  for (const Lane& l : app.controller().snapshot()->lanes) got.push_back(format_strategy(l.params));
  EXPECT_EQ(got, strategies);
  const auto check = [&](int s) {
    ASSERT_EQ(app.controller().snapshot()->history.size(), static_cast<size_t>(s + 1));
    for (int l : pass_lanes) {
      SCOPED_TRACE("step " + std::to_string(s) + ", lane " + std::to_string(l));
      EXPECT_TRUE(shown_pass(app, l) == live[s][l]);
    }
  };
  check(0);
  for (int s = 1; s < kSteps; ++s) {
    app.advance();
    app.settle(2, 50);
    check(s);
  }
  EXPECT_TRUE(shown_timeline(app) == live_timeline);
  for (int s = kSteps - 2; s >= 0; --s) {
    app.back();
    app.settle(2, 50);
    check(s);
  }
  fs::remove(file);
}

TEST(GuiReopen, AFileItCannotReadLeavesTheSessionAsItWas) {
  REQUIRE_DISPLAY();
  App app(live_options());
  app.load_model_blocking();
  app.settle();
  app.advance();
  app.settle(2, 100);
  const SnapshotPtr before = app.controller().snapshot();
  const fs::path bad = fs::temp_directory_path() / ("ts-reopen-bad-" + std::to_string(getpid()));
  { std::ofstream(bad) << R"({"format": "tokenscope-session/2", "model": {"vocab_size": 3)"; }
  try {
    app.open_session(bad);
    ADD_FAILURE() << "a truncated file was opened";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(bad.string() + ": ", 0), 0u) << what;
    EXPECT_NE(what.find("truncated or corrupt"), std::string::npos) << what;
  }
  app.settle(2, 20);
  EXPECT_FALSE(app.controller().replaying());
  EXPECT_EQ(app.controller().snapshot(), before);
  EXPECT_NE(app.controller().worker(), nullptr);
  fs::remove(bad);
}

// --open with --lane N shows lane N of the file, with its strategy, from
// the prefill on; a branch from the step after it was made; a lane the file
// does not hold is refused in one line naming the lanes it does.
TEST(GuiReopen, LaneFlagPicksALaneOfTheFile) {
  REQUIRE_DISPLAY();
  const fs::path file =
      fs::temp_directory_path() / ("ts-reopen-lane-" + std::to_string(getpid()) + ".json");
  {
    App app(live_options());
    load_and_step(app, 3);
    // Lane 2: a branch of lane 0 at step 1, made after step 2.
    const SnapshotPtr snap = app.controller().snapshot();
    ASSERT_EQ(snap->lanes.size(), 2u);
    app.controller().worker()->branch(1, 0, snap->history[1]->lanes[0].chosen_token == 0 ? 1 : 0);
    app.controller().worker()->wait_idle();
    app.advance();
    app.settle(2, 100);
    ASSERT_EQ(app.controller().snapshot()->lanes.size(), 3u);
    ASSERT_EQ(app.controller().snapshot()->lanes[2].first_step, 3);
    app.controller().analysis()->export_json(*app.controller().worker(), file.string());
    app.controller().worker()->wait_idle();
    ASSERT_EQ(app.controller().analysis()->export_message(), "wrote " + file.string());
  }
  {
    App app(bare_options());
    app.frame();
    app.open_session(file, 1);
    app.settle();
    EXPECT_EQ(app.state().lane, 1);
    EXPECT_EQ(format_strategy(app.state().strategy),
              format_strategy(parse_strategy(live_options().compare[1])));
  }
  {
    App app(bare_options());
    app.frame();
    app.open_session(file, 2);
    app.settle();
    EXPECT_EQ(app.state().lane, 0);  // the branch does not exist at the prefill
    for (int i = 0; i < 3; ++i) {
      app.advance();
      app.settle(2, 50);
    }
    ASSERT_EQ(app.controller().snapshot()->history.size(), 4u);
    EXPECT_EQ(app.state().lane, 2);
  }
  App app(bare_options());
  app.frame();
  try {
    app.open_session(file, 3);
    ADD_FAILURE() << "--lane 3 was accepted for a file of 3 lanes";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--lane 3: " + file.string() + " holds lanes 0 to 2");
  }
  fs::remove(file);
}

}  // namespace
}  // namespace ts::app
