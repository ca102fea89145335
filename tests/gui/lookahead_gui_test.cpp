// GUI test of the "Lookahead & prompt lookup" panel: on the bundled model,
// with a greedy, a lookahead and a prompt-lookup lane on a prompt that
// repeats itself, the panel shows what the session recorded for the viewed
// pass (the Jacobi window and its next row, the pool, the candidates with
// the accepted prefix, the tokens committed, the rows fed), says in one line
// what it is for on other lanes, and keeps every token inside its cell.
// Run:  xvfb-run -a -s "-screen 0 1920x1080x24 -noreset" build-gui/ts_gui_tests
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/app.h"
#include "app/panels/attention.h"
#include "app/panels/lanes.h"
#include "app/panels/lookahead.h"
#include "app/panels/timeline.h"
#include "app/panels/transport.h"
#include "app/view_model.h"
#include "gui_test_support.h"
#include "session/model_setup.h"

namespace ts::app {
namespace {

// The bundled model's favourite loop: both methods find guesses that the
// model accepts within the first three passes.
constexpr const char* kRepeats = "I'm not sure I'm not sure I'm not sure";

// The bundled model, the given lanes, the Lookahead panel alone.
AppOptions lookahead_options(const std::vector<std::string>& lanes, int width = 1280,
                             int height = 800, bool presentation = false) {
  AppOptions o = test::fixture_options("lookahead", kRepeats);
  o.setup.model.clear();
  o.compare = lanes;
  o.width = width;
  o.height = height;
  o.presentation = presentation;
  return o;
}

void step(App& app) {
  app.frame();
  app.advance();
  app.settle(3, 6);
}

// Views the newest step of `lane` and checks the panel against its record.
const LookaheadPass& check_panel_matches_record(App& app, int lane) {
  const SnapshotPtr s = app.controller().snapshot();
  select_lane(app.state(), s.get(), lane);
  app.settle(2, 4);
  const LaneStep* rec = lane_record(*s, static_cast<int>(s->history.size()) - 1, lane);
  EXPECT_TRUE(rec && rec->lookahead);
  const LookaheadPass& p = *rec->lookahead;
  const LookaheadPanelView& v = app.lookahead_panel().view();
  EXPECT_TRUE(v.has_pass);
  EXPECT_EQ(v.prompt_lookup, p.prompt_lookup);
  if (!p.prompt_lookup) {
    EXPECT_EQ(v.window_rows, p.window.rows);
    EXPECT_EQ(v.window_cols, p.window.cols);
    EXPECT_GT(v.window_rows * v.window_cols, 0);
    EXPECT_EQ(v.window_cells.size(), p.window.tokens.size());
    for (size_t i = 0; i < v.window_cells.size() && i < p.window.tokens.size(); ++i) {
      EXPECT_EQ(v.window_cells[i], token_piece(*s, p.window.tokens[i]));
      EXPECT_EQ(v.window_changed[i], p.window.changed[i]);
    }
    EXPECT_EQ(v.window_next.size(), p.window_outputs.size());
    EXPECT_EQ(v.pool_size, p.pool_size);
    EXPECT_EQ(v.new_ngrams, p.new_ngrams);
  } else {
    EXPECT_TRUE(v.window_cells.empty());
  }
  EXPECT_EQ(v.candidates.size(), p.layout.candidates.size());
  EXPECT_EQ(v.accepted_candidate, p.verdict.candidate);
  EXPECT_EQ(v.matched, p.verdict.matched);
  for (size_t g = 0; g < v.candidates.size() && g < p.layout.candidates.size(); ++g) {
    EXPECT_EQ(v.candidates[g].tokens, p.layout.candidates[g]);
    EXPECT_EQ(v.candidates[g].accepted, static_cast<int>(g) == p.verdict.candidate);
    // The accepted candidate's marked prefix is what the pass committed first.
    if (v.candidates[g].accepted) {
      EXPECT_GE(v.candidates[g].agree, p.verdict.matched);
    }
  }
  EXPECT_FALSE(p.committed.empty());
  if (p.committed.empty()) return p;
  EXPECT_EQ(v.committed.size(), p.committed.size());
  for (size_t i = 0; i < v.committed.size(); ++i)
    EXPECT_EQ(v.committed[i], token_piece(*s, p.committed[i]));
  EXPECT_EQ(v.model_token, p.verdict.committed[p.verdict.matched]);
  EXPECT_EQ(v.fed, p.fed());
  EXPECT_EQ(v.seconds, p.seconds);
  // The lane's totals, summed here from the records.
  int passes = 0, committed = 0;
  for (const StepTracePtr& t : s->history) {
    const LaneStep* ls = find_lane_step(*t, lane);
    if (!ls || !ls->lookahead) continue;
    ++passes;
    committed += static_cast<int>(ls->lookahead->committed.size());
  }
  EXPECT_EQ(v.totals.passes, passes);
  EXPECT_EQ(v.totals.committed, committed);
  EXPECT_EQ(v.clipped_cells, 0);
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kLookahead));
  EXPECT_EQ(app.last_frame().gl_errors, 0);
  return p;
}

TEST(GuiLookahead, PassesOnARepeatingPromptMatchTheRecord) {
  REQUIRE_DISPLAY();
  App app(lookahead_options({"greedy", "lookahead", "prompt_lookup"}));
  app.load_model_blocking();
  app.settle();
  // Prefill: no pass yet; the panel says when the first comes.
  step(app);
  select_lane(app.state(), app.controller().snapshot().get(), 1);
  app.settle(2, 4);
  EXPECT_FALSE(app.lookahead_panel().view().has_pass);
  EXPECT_NE(app.lookahead_panel().view().message.find("next decode step"), std::string::npos);
  // The step control's "Next:" line says the pass may commit several tokens.
  EXPECT_NE(TransportPanel::next_text(*app.controller().snapshot())
                .find("lookahead and prompt-lookup lanes: one pass each"),
            std::string::npos)
      << TransportPanel::next_text(*app.controller().snapshot());
  bool window_accepted = false, draft_accepted = false, changed = false;
  for (int i = 0; i < 10 && !(window_accepted && draft_accepted && changed); ++i) {
    step(app);
    const SnapshotPtr s = app.controller().snapshot();
    ASSERT_TRUE(s->last_error.empty()) << s->last_error;
    if (s->lanes[1].running()) {
      const LookaheadPass& p = check_panel_matches_record(app, 1);
      EXPECT_FALSE(p.prompt_lookup);
      window_accepted = window_accepted || p.verdict.matched > 0;
      for (uint8_t c : p.window.changed) changed = changed || c;
    }
    if (s->lanes[2].running()) {
      const LookaheadPass& p = check_panel_matches_record(app, 2);
      EXPECT_TRUE(p.prompt_lookup);
      draft_accepted = draft_accepted || p.verdict.matched > 0;
    }
  }
  EXPECT_TRUE(window_accepted) << "no lookahead candidate accepted in 10 passes";
  EXPECT_TRUE(draft_accepted) << "no prompt-lookup draft accepted in 10 passes";
  EXPECT_TRUE(changed) << "the window never showed a changed cell";
  // What lesson 5 (assets/lessons/5-no-draft-model-needed.lesson) tells the
  // class on this prompt: prompt lookup's first pass accepts two of its four
  // draft tokens and commits three; lookahead's third pass verifies two
  // candidates from a pool of 7, accepts the first whole (two tokens) and
  // commits three from 13 rows.
  {
    const SnapshotPtr s = app.controller().snapshot();
    ASSERT_GE(s->history.size(), 4u);
    const LaneStep* pl = lane_record(*s, 1, 2);
    ASSERT_TRUE(pl && pl->lookahead);
    ASSERT_EQ(pl->lookahead->layout.candidates.size(), 1u);
    EXPECT_EQ(pl->lookahead->layout.candidates[0].size(), 4u);
    EXPECT_EQ(pl->lookahead->verdict.matched, 2);
    EXPECT_EQ(pl->lookahead->committed.size(), 3u);
    const LaneStep* la = lane_record(*s, 3, 1);
    ASSERT_TRUE(la && la->lookahead);
    EXPECT_EQ(la->lookahead->pool_size, 7);
    EXPECT_EQ(la->lookahead->layout.candidates.size(), 2u);
    EXPECT_EQ(la->lookahead->verdict.candidate, 0);
    EXPECT_EQ(la->lookahead->verdict.matched, 2);
    EXPECT_EQ(la->lookahead->committed.size(), 3u);
    EXPECT_EQ(la->lookahead->fed(), 13);
  }
  // A greedy lane: one line saying what the panel is for.
  select_lane(app.state(), app.controller().snapshot().get(), 0);
  app.settle(2, 4);
  EXPECT_FALSE(app.lookahead_panel().view().has_pass);
  EXPECT_NE(app.lookahead_panel().view().message.find("lookahead and prompt-lookup lanes"),
            std::string::npos);
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

// A projector's large font in a small window: every token stays inside its
// cell (cut with an ellipsis), and nothing is drawn past the vertex limit.
TEST(GuiLookahead, TheWindowAndCandidatesFitAProjector) {
  REQUIRE_DISPLAY();
  App app(lookahead_options({"lookahead=8,4,6"}, 1024, 768, true));
  app.load_model_blocking();
  app.settle();
  step(app);
  for (int i = 0; i < 3; ++i) {
    step(app);
    check_panel_matches_record(app, 0);
  }
}

// Prefill and three passes of each lane on the repeating prompt (the third
// lookahead pass is lesson 5's: 13 rows, two candidates, a 2 x 4 window).
void three_passes(App& app) {
  app.load_model_blocking();
  app.settle();
  for (int i = 0; i < 4; ++i) {
    step(app);
    ASSERT_TRUE(app.controller().snapshot()->last_error.empty());
  }
}

// The Timeline: each step's lookahead and prompt-lookup passes as tokens
// committed beside rows fed, and the step's tooltip line "3 tok / 13 fed".
TEST(GuiLookahead, TimelineShowsEachPassTokensBesideRowsFed) {
  REQUIRE_DISPLAY();
  {
    // Without such lanes the chart is not drawn.
    AppOptions g = lookahead_options({"greedy"});
    g.layout = "timeline";
    App plain(g);
    three_passes(plain);
    plain.settle(2, 4);
    ASSERT_TRUE(plain.last_frame().was_drawn(PanelId::kTimeline));
    EXPECT_TRUE(plain.timeline_panel().pass_series().empty());
  }
  AppOptions o = lookahead_options({"greedy", "lookahead", "prompt_lookup"});
  o.layout = "timeline";
  App app(o);
  three_passes(app);
  app.settle(2, 4);
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kTimeline));
  const SnapshotPtr s = app.controller().snapshot();
  const std::vector<ChartSeries>& passes = app.timeline_panel().pass_series();
  const std::vector<std::string>& notes = app.timeline_panel().notes();
  ASSERT_EQ(passes.size(), 2u) << "tokens committed and rows fed";
  ASSERT_EQ(notes.size(), s->history.size());
  for (size_t i = 0; i < s->history.size(); ++i) {
    ASSERT_LT(i, passes[0].values.size());
    ASSERT_LT(i, passes[1].values.size());
    int n = 0, committed = 0, fed = 0;
    for (const LaneStep& ls : s->history[i]->lanes) {
      if (!ls.lookahead) continue;
      ++n;
      committed += static_cast<int>(ls.lookahead->committed.size());
      fed += static_cast<int>(ls.input_tokens.size());
    }
    EXPECT_EQ(passes[0].values[i], committed) << "step " << i;
    EXPECT_EQ(passes[1].values[i], fed) << "step " << i;
    if (n == 0) {
      EXPECT_EQ(notes[i].find(" fed"), std::string::npos) << notes[i];
      continue;
    }
    EXPECT_EQ(n, 2) << "both lanes ran one pass at step " << i;
    const std::string want =
        std::to_string(committed) + " tok / " + std::to_string(fed) + " fed (2 passes)";
    EXPECT_NE(notes[i].find(want), std::string::npos) << notes[i] << " lacks " << want;
  }
  // The prefill has no pass; lesson 5's third lookahead pass is in step 3's bar.
  EXPECT_EQ(passes[1].values[0], 0.0);
  const LaneStep* la = lane_record(*s, 3, 1);
  ASSERT_TRUE(la && la->lookahead);
  EXPECT_GE(passes[1].values[3], 13.0);
  // One pass alone reads as the task describes it.
  TimelineBar one;
  one.passes = 1;
  one.pass_committed = 3;
  one.pass_fed = 17;
  EXPECT_EQ(timeline_pass_note(one), "3 tok / 17 fed");
  EXPECT_EQ(timeline_pass_note(TimelineBar{}), "");
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

// The row stepper walks the viewed pass's fed rows: each row's token,
// position, branch and mask row are the layout's, the branches' masks are
// the paper's, and the row is clamped when a pass with fewer rows is viewed.
TEST(GuiLookahead, RowStepperShowsEachFedRowsBranchAndMask) {
  REQUIRE_DISPLAY();
  App app(lookahead_options({"greedy", "lookahead", "prompt_lookup"}));
  three_passes(app);
  const SnapshotPtr s = app.controller().snapshot();
  select_lane(app.state(), s.get(), 1);
  app.state().view_step = 3;
  app.settle(2, 4);
  const LaneStep* rec = lane_record(*s, 3, 1);
  ASSERT_TRUE(rec && rec->lookahead);
  const LookaheadPassLayout& l = rec->lookahead->layout;
  const int n = static_cast<int>(l.tokens.size());
  ASSERT_EQ(n, 13);
  ASSERT_EQ(l.candidates.size(), 2u);
  ASSERT_GE(l.window_row, 0);
  int inputs = 0, candidate_rows = 0, window_rows = 0;
  for (int r = 0; r < n; ++r) {
    app.lookahead_panel().select_row(r);
    app.settle(2, 4);
    const LookaheadPanelView& v = app.lookahead_panel().view();
    ASSERT_TRUE(v.has_pass);
    EXPECT_EQ(v.row, r);
    EXPECT_EQ(v.row_token, l.tokens[r]);
    EXPECT_EQ(v.row_piece, token_piece(*s, l.tokens[r]));
    EXPECT_EQ(v.row_position, l.positions[r]);
    // The mask row as the panel lists it.
    std::vector<int> mask_row;
    for (int j = 0; j < n; ++j)
      if (l.mask[static_cast<size_t>(r) * n + j]) mask_row.push_back(j);
    EXPECT_EQ(v.row_sees, mask_row) << "row " << r;
    const LookaheadRowBranch& b = v.row_branch;
    std::vector<int> paper = {0};  // every row sees x
    if (r == 0) {
      ++inputs;
      EXPECT_EQ(b.kind, LookaheadRowBranch::kInput);
      EXPECT_EQ(b.text(), "input: the last token x");
    } else if (r < l.window_row) {
      ++candidate_rows;
      ASSERT_EQ(b.kind, LookaheadRowBranch::kCandidate) << "row " << r;
      ASSERT_GE(b.candidate, 0);
      const int first = l.candidate_row[b.candidate];
      EXPECT_EQ(first + b.index, r);
      EXPECT_EQ(l.candidates[b.candidate][b.index], l.tokens[r]);
      EXPECT_EQ(v.row_position, l.positions[0] + 1 + b.index);
      // A candidate's token sees its own branch's tokens up to itself.
      for (int i = 0; i <= b.index; ++i) paper.push_back(first + i);
      EXPECT_NE(b.text().find("verification candidate " + std::to_string(b.candidate + 1)),
                std::string::npos);
    } else {
      ++window_rows;
      ASSERT_EQ(b.kind, LookaheadRowBranch::kWindow) << "row " << r;
      EXPECT_EQ(l.window_row + b.row * l.window_cols + b.col, r);
      EXPECT_EQ(v.row_position, l.positions[0] + 1 + b.row + b.col);
      // A window cell sees row 0 up to its column and its column above it.
      for (int c = 0; c <= b.col; ++c) paper.push_back(l.window_row + c);
      for (int rr = 1; rr <= b.row; ++rr)
        paper.push_back(l.window_row + rr * l.window_cols + b.col);
      EXPECT_NE(b.text().find("lookahead window row " + std::to_string(b.row + 1) + ", column " +
                              std::to_string(b.col + 1)),
                std::string::npos);
    }
    EXPECT_EQ(v.row_sees, paper) << "row " << r << ": " << b.text();
  }
  EXPECT_EQ(inputs, 1);
  EXPECT_EQ(candidate_rows, 4);
  EXPECT_EQ(window_rows, 8);
  EXPECT_EQ(app.last_frame().gl_errors, 0);

  // Past the end: the last row. The prompt-lookup lane's pass has fewer
  // rows: the stepper moves to its last.
  app.lookahead_panel().select_row(100);
  app.settle(2, 4);
  EXPECT_EQ(app.lookahead_panel().view().row, n - 1);
  const LaneStep* pl = lane_record(*s, 3, 2);
  ASSERT_TRUE(pl && pl->lookahead);
  ASSERT_LT(pl->lookahead->fed(), n);
  select_lane(app.state(), s.get(), 2);
  app.settle(2, 4);
  const LookaheadPanelView& v = app.lookahead_panel().view();
  ASSERT_TRUE(v.has_pass);
  EXPECT_EQ(v.fed, pl->lookahead->fed());
  EXPECT_EQ(v.row, v.fed - 1);
  EXPECT_EQ(v.row_token, pl->lookahead->layout.tokens[v.fed - 1]);
  app.lookahead_panel().select_row(-3);
  app.settle(2, 4);
  EXPECT_EQ(app.lookahead_panel().view().row, 0);
  EXPECT_EQ(app.lookahead_panel().view().row_branch.kind, LookaheadRowBranch::kInput);
}

// Attention on a lookahead pass: the earlier passes keep only the rows of
// the tokens they committed (row r is position r), the viewed pass shows all
// of its fed rows with their tokens, the model gave no weight where the
// pass's mask forbids it, and those cells are the ones greyed over.
TEST(GuiLookahead, AttentionGreysWhatThePassMaskForbids) {
  REQUIRE_DISPLAY();
  AppOptions o = lookahead_options({"greedy", "lookahead", "prompt_lookup"});
  o.layout = "attention";
  App app(o);
  three_passes(app);
  const SnapshotPtr s = app.controller().snapshot();
  select_lane(app.state(), s.get(), 1);
  app.state().view_step = 3;
  for (int i = 0; i < 200 && !app.attention_panel().settled(); ++i) app.settle(1, 2);
  app.settle(2, 4);
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kAttention));
  ASSERT_TRUE(app.attention_panel().settled());
  const LaneStep* rec = lane_record(*s, 3, 1);
  ASSERT_TRUE(rec && rec->lookahead);
  const LookaheadPassLayout& l = rec->lookahead->layout;
  const int start = rec->start_pos, fed = static_cast<int>(l.tokens.size());
  const AttentionMatrix& m = app.attention_panel().matrix();
  ASSERT_EQ(m.n, start + fed) << "earlier passes keep one row per committed position";
  EXPECT_EQ(m.first_new_row, start);
  ASSERT_EQ(m.pass_rows, fed);
  EXPECT_EQ(m.pass_mask, l.mask);
  // The rows' tokens: the lane's context, then the fed tokens.
  ASSERT_EQ(m.tokens.size(), static_cast<size_t>(m.n));
  for (int r = 0; r < start; ++r) EXPECT_EQ(m.tokens[r], rec->context_ids[r]) << "row " << r;
  for (int i = 0; i < fed; ++i) EXPECT_EQ(m.tokens[start + i], l.tokens[i]) << "fed row " << i;
  int forbidden = 0;
  for (int q = 0; q < fed; ++q)
    for (int k = 0; k < q; ++k) {
      const bool sees = l.mask[static_cast<size_t>(q) * fed + k] != 0;
      EXPECT_EQ(m.pass_allows(start + q, start + k), sees);
      if (sees) continue;
      ++forbidden;
      EXPECT_EQ(m.at(start + q, start + k), 0.0f) << "fed row " << q << " weighs fed row " << k;
    }
  EXPECT_GT(forbidden, 0);
  EXPECT_EQ(app.attention_panel().pass_masked_cells(), forbidden);
  EXPECT_EQ(app.last_frame().gl_errors, 0);
  // A greedy lane's step: no pass, nothing greyed.
  select_lane(app.state(), s.get(), 0);
  for (int i = 0; i < 200 && !app.attention_panel().settled(); ++i) app.settle(1, 2);
  app.settle(2, 4);
  EXPECT_EQ(app.attention_panel().matrix().pass_rows, 0);
  EXPECT_EQ(app.attention_panel().pass_masked_cells(), 0);
}

// "Add a lane" offers both, and a click adds a lane of that kind; a greedy
// session's "Next:" line says nothing of passes.
TEST(GuiLookahead, AddALaneOffersLookaheadAndPromptLookup) {
  REQUIRE_DISPLAY();
  AppOptions o = lookahead_options({"greedy"});
  o.layout = "lanes";
  App app(o);
  app.load_model_blocking();
  app.settle();
  int lookahead = 0, prompt_lookup = 0;
  for (const auto& [label, strategy] : lane_presets()) {
    const SamplingParams p = parse_strategy(strategy);
    if (p.lookahead_on) {
      ++lookahead;
      EXPECT_EQ(label, "lookahead");
    }
    if (p.prompt_lookup_on) {
      ++prompt_lookup;
      EXPECT_EQ(label, "prompt lookup");
    }
  }
  EXPECT_EQ(lookahead, 1);
  EXPECT_EQ(prompt_lookup, 1);
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kLanes));
  for (const char* label : {"lookahead", "prompt lookup"}) {
    const PanelBox b = app.lanes_panel().preset_box(label);
    EXPECT_GT(b.w, 0.0f) << label << " has no button";
  }
  step(app);  // prefill
  const std::string next = TransportPanel::next_text(*app.controller().snapshot());
  EXPECT_EQ(next.find("may commit several tokens"), std::string::npos) << next;
}

}  // namespace
}  // namespace ts::app
