// GUI test of speculative decoding in the window: --draft-model loads the
// draft and hands it to the session; the "Speculative decoding" panel shows
// what the session recorded for the viewed round (verdicts, p and q, p/q and
// u, the residual at a sampled rejection, the running acceptance rate), its
// stepper reveals the drafts one at a time, and a missing or mismatched
// draft is refused in one line while the target still loads.
// Run:  xvfb-run -a -s "-screen 0 1920x1080x24 -noreset" build-gui/ts_gui_tests
#include <gtest/gtest.h>

#include <utility>

#include <algorithm>
#include <random>

#include "../unit/test_model_writer.h"
#include "app/app.h"
#include "app/panels/lanes.h"
#include "app/panels/spec.h"
#include "app/view_model.h"
#include "gui_test_support.h"
#include "session/model_setup.h"
#include "util/error.h"

namespace ts::app {
namespace {

namespace fs = std::filesystem;

// A draft for the bundled model that disagrees with it now and then: its
// first layer only, with noise on the block weights (the tokenizer files
// copied, so the vocabulary is the target's).
struct TruncatedDraft {
  ts::test::TempDir dir{"tokenscope-spec-gui"};
  fs::path path = dir / "draft";
  TruncatedDraft() {
    ModelSetupOptions so;
    so.cpu_threads = 2;
    const LoadedModel target = load_model_setup(so);
    std::mt19937 rng(17);
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    ts::test::RandomGpt2 draft;
    draft.config = target.engine->config();
    draft.config.n_layer = 1;
    for (const auto& [name, shape] : ts::test::gpt2_tensor_shapes(draft.config)) {
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      const float* src = ts::test::find_weight(target.engine->weights(), name);
      if (!src) throw Error("test: no tensor " + name);
      std::vector<float>& t = draft.tensors[name];
      t.assign(src, src + count);
      if (name.rfind("h.", 0) == 0 && name.find("weight") != std::string::npos)
        for (float& w : t) w *= 1.0f + 0.3f * gauss(rng);
    }
    ts::test::write_hf_dir(draft, path);
    for (const char* f : {"vocab.json", "merges.txt"})
      fs::copy_file(default_model_path() / f, path / f, fs::copy_options::overwrite_existing);
  }
};

const fs::path& truncated_draft() {
  static TruncatedDraft d;
  return d.path;
}

// The bundled model as the target, the given lanes, the panel on screen.
AppOptions spec_options(const std::vector<std::string>& lanes, const fs::path& draft) {
  AppOptions o = test::fixture_options("speculative", "Once upon a time");
  o.setup.model.clear();  // the bundled model
  o.compare = lanes;
  o.draft_model = draft;
  return o;
}

// settle() waits for the worker before every frame; its frame cap is kept
// low because the layout has no Attention panel to wait for.
void step(App& app) {
  app.frame();
  app.advance();
  app.settle(3, 6);
}

// Views the newest step of `lane` and checks the panel's rows against the record.
const SpecRound& check_panel_matches_record(App& app, int lane) {
  const SnapshotPtr s = app.controller().snapshot();
  select_lane(app.state(), s.get(), lane);
  app.settle(2, 4);
  const LaneStep* rec = lane_record(*s, static_cast<int>(s->history.size()) - 1, lane);
  EXPECT_TRUE(rec && rec->spec);
  const SpecRound& r = *rec->spec;
  // The window's tokens for the round are the lane's own: the prompt and
  // every committed token, no rejected draft; the KV cache holds all but the
  // last (the token the round chose, fed by the next round).
  const StepView sv = make_step_view(*s, static_cast<int>(s->history.size()) - 1, lane);
  std::vector<int> lane_tokens;
  for (const TokenSpan& t : s->prompt_tokens) lane_tokens.push_back(t.id);
  lane_tokens.insert(lane_tokens.end(), s->lanes[lane].generated.begin(),
                     s->lanes[lane].generated.end());
  EXPECT_EQ(sv.tokens, lane_tokens);
  EXPECT_EQ(sv.cached, r.target_after);
  const SpecPanelView& v = app.speculative_panel().view();
  EXPECT_TRUE(v.has_round);
  EXPECT_EQ(v.gamma, r.gamma);
  EXPECT_EQ(v.gamma_planned, r.gamma_planned);
  EXPECT_EQ(v.gamma_next, r.gamma_next);
  EXPECT_EQ(v.accepted, r.accepted);
  EXPECT_EQ(v.next_token, r.next_token);
  EXPECT_EQ(v.next_kind, spec_next_name(r.next));
  EXPECT_TRUE(v.verdict_shown);
  EXPECT_EQ(static_cast<int>(v.rows.size()), r.gamma);
  int accepted_rows = 0;
  for (size_t i = 0; i < v.rows.size() && i < r.drafts.size(); ++i) {
    const SpecDraftToken& d = r.drafts[i];
    EXPECT_EQ(v.rows[i].token, d.token);
    EXPECT_EQ(v.rows[i].piece, token_piece(*s, d.token));
    EXPECT_EQ(v.rows[i].p, d.p);
    EXPECT_EQ(v.rows[i].q, d.q);
    EXPECT_EQ(v.rows[i].ratio, d.ratio);
    EXPECT_EQ(v.rows[i].uniform, d.uniform);
    EXPECT_EQ(v.rows[i].verdict,
              d.accepted ? "accepted" : (d.checked ? "rejected" : "not checked"));
    accepted_rows += v.rows[i].verdict == "accepted";
  }
  EXPECT_EQ(accepted_rows, r.accepted);
  // The running totals: summed here from the records, independently.
  int drafted = 0, accepted = 0, rounds = 0, committed = 0;
  for (const StepTracePtr& t : s->history) {
    const LaneStep* ls = find_lane_step(*t, lane);
    if (!ls || !ls->spec) continue;
    ++rounds;
    drafted += ls->spec->gamma;
    accepted += ls->spec->accepted;
    committed += static_cast<int>(ls->spec->committed.size());
  }
  EXPECT_EQ(v.totals.rounds, rounds);
  EXPECT_EQ(v.totals.drafted, drafted);
  EXPECT_EQ(v.totals.accepted, accepted);
  EXPECT_DOUBLE_EQ(v.totals.acceptance(), static_cast<double>(accepted) / drafted);
  EXPECT_DOUBLE_EQ(v.totals.tokens_per_pass(), static_cast<double>(committed) / rounds);
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kSpeculative));
  EXPECT_EQ(app.last_frame().gl_errors, 0);
  return r;
}

TEST(GuiSpeculative, GreedyRoundsWithARejectionMatchTheRecord) {
  REQUIRE_DISPLAY();
  App app(spec_options({"greedy", "spec=4"}, truncated_draft()));
  app.load_model_blocking();
  app.settle();
  EXPECT_EQ(app.controller().draft_name(), "draft");
  // Prefill: not a round. The panel says so and how to get one.
  step(app);
  select_lane(app.state(), app.controller().snapshot().get(), 0);
  app.settle(2, 4);
  EXPECT_FALSE(app.speculative_panel().view().has_round);
  EXPECT_NE(app.speculative_panel().view().message.find("spec 4"), std::string::npos);
  bool rejection = false, all_accepted = false;
  for (int i = 0; i < 12 && !(rejection && all_accepted); ++i) {
    step(app);
    const SpecRound& r = check_panel_matches_record(app, 1);
    EXPECT_FALSE(r.sampled);
    if (r.accepted < r.gamma) {
      rejection = true;
      EXPECT_EQ(app.speculative_panel().view().next_kind, "correction");
      // Greedy: the correction is the target's argmax at the rejected row.
      EXPECT_EQ(r.next_token, r.drafts[r.accepted].target_choice);
      EXPECT_TRUE(app.speculative_panel().view().residual_top.empty());
    } else {
      all_accepted = true;
      EXPECT_EQ(app.speculative_panel().view().next_kind, "bonus");
    }
  }
  EXPECT_TRUE(rejection) << "the truncated draft never disagreed in 12 rounds";
  const double rate = app.speculative_panel().view().totals.acceptance();
  EXPECT_GT(rate, 0.0);
  EXPECT_LT(rate, 1.0);

  // The stepper: k drafts revealed, no verdict, then the verdict.
  SpeculativePanel& panel = app.speculative_panel();
  const int gamma = panel.view().gamma;
  ASSERT_GE(gamma, 2);
  panel.set_substep(2);
  app.settle(2, 4);
  EXPECT_EQ(panel.view().revealed, 2);
  EXPECT_EQ(panel.view().rows.size(), 2u);
  EXPECT_FALSE(panel.view().verdict_shown);
  panel.set_substep(0);
  app.settle(2, 4);
  EXPECT_TRUE(panel.view().rows.empty());
  panel.set_substep(gamma + 1);
  app.settle(2, 4);
  EXPECT_EQ(static_cast<int>(panel.view().rows.size()), gamma);
  EXPECT_TRUE(panel.view().verdict_shown);
  // A new round restarts the walk at its first draft.
  panel.set_substep(gamma);
  step(app);
  select_lane(app.state(), app.controller().snapshot().get(), 1);
  app.settle(2, 4);
  EXPECT_EQ(panel.substep(), 0);
  EXPECT_TRUE(panel.view().rows.empty());
  panel.set_substep(-1);
  app.settle(2, 4);
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

// On a projector (presentation mode, 1024x768 and 1280x720) and on a desk
// screen (1600x900) the round's
// table keeps every value readable: no cell's text runs past its column
// (before, the 6-em bars squeezed p, p/q and u into slivers); the bars
// shrink or go, the values stay.
TEST(GuiSpeculative, TheRoundsTableFitsAProjector) {
  REQUIRE_DISPLAY();
  for (const auto& [w, h] : {std::pair{1024, 768}, std::pair{1280, 720}, std::pair{1600, 900}}) {
    AppOptions o = spec_options({"greedy", "spec=4,temperature=1.0,seed=5"}, truncated_draft());
    o.presentation = w < 1600;  // 1600x900: a desk screen, normal fonts
    o.width = w;
    o.height = h;
    App app(o);
    app.load_model_blocking();
    app.settle();
    step(app);  // prefill
    step(app);
    select_lane(app.state(), app.controller().snapshot().get(), 1);
    app.settle(3, 6);
    const SpecPanelView& v = app.speculative_panel().view();
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h));
    ASSERT_TRUE(v.has_round);
    ASSERT_FALSE(v.rows.empty());
    EXPECT_EQ(v.clipped_cells, 0);
    if (w >= 1600) {
      EXPECT_GT(v.bar_width, 0) << "a desk screen keeps the bars";
    }
    EXPECT_EQ(app.last_frame().gl_errors, 0);
  }
}

TEST(GuiSpeculative, SampledRejectionShowsTheResidualOfTheRecord) {
  REQUIRE_DISPLAY();
  App app(spec_options({"spec=4,temperature=1.0,seed=5"}, truncated_draft()));
  app.load_model_blocking();
  app.settle();
  step(app);  // prefill
  bool residual = false;
  for (int i = 0; i < 16 && !residual; ++i) {
    step(app);
    const SpecRound& r = check_panel_matches_record(app, 0);
    EXPECT_TRUE(r.sampled);
    if (r.next != SpecNext::kCorrection || r.residual.empty() || r.residual_fallback) continue;
    residual = true;
    const SpecPanelView& v = app.speculative_panel().view();
    ASSERT_FALSE(v.residual_top.empty());
    const auto top = std::max_element(r.residual.begin(), r.residual.end());
    EXPECT_EQ(v.residual_top[0].first, static_cast<int>(top - r.residual.begin()));
    EXPECT_EQ(v.residual_top[0].second, *top);
    for (size_t k = 1; k < v.residual_top.size(); ++k)
      EXPECT_GE(v.residual_top[k - 1].second, v.residual_top[k].second);
    // The rejected draft: u was not below p / q.
    const SpecPanelView::Row& rejected = v.rows[r.accepted];
    EXPECT_EQ(rejected.verdict, "rejected");
    EXPECT_GE(rejected.uniform, rejected.ratio);
    EXPECT_EQ(v.next_uniform, r.next_uniform);
  }
  EXPECT_TRUE(residual) << "no sampled rejection drawn from the residual in 16 rounds";
}

// The bundled model as its own draft: every draft accepted.
TEST(GuiSpeculative, TheTargetAsItsOwnDraftAcceptsEverything) {
  REQUIRE_DISPLAY();
  App app(spec_options({"spec=3"}, default_model_path()));
  app.load_model_blocking();
  app.settle();
  for (int i = 0; i < 4; ++i) step(app);
  const SpecRound& r = check_panel_matches_record(app, 0);
  EXPECT_EQ(r.accepted, r.gamma);
  EXPECT_DOUBLE_EQ(app.speculative_panel().view().totals.acceptance(), 1.0);
}

TEST(GuiSpeculative, MissingOrMismatchedDraftIsRefusedInOneLine) {
  // The command line: a speculative lane without a draft.
  std::vector<const char*> argv = {"tokenscope", "--strategy", "spec=4"};
  try {
    parse_app_options(static_cast<int>(argv.size()), argv.data());
    ADD_FAILURE() << "spec=4 without --draft-model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs --draft-model DIR"), std::string::npos);
  }
  argv = {"tokenscope", "--draft-model", "d", "--strategy", "spec=4", "--no-kv-cache"};
  EXPECT_THROW(parse_app_options(static_cast<int>(argv.size()), argv.data()), Error);
  argv = {"tokenscope", "--draft-model", "d"};  // no spec lane yet: the Lanes panel adds one
  EXPECT_EQ(parse_app_options(static_cast<int>(argv.size()), argv.data()).draft_model, "d");
  argv = {"tokenscope", "--open", "s.json", "--draft-model", "d"};
  EXPECT_THROW(parse_app_options(static_cast<int>(argv.size()), argv.data()), Error);

  REQUIRE_DISPLAY();
  // A draft directory that does not exist: --screenshot (blocking load)
  // stops with one line, as for a bad --model ...
  {
    App app(spec_options({"spec=4"}, "/nonexistent/draft"));
    try {
      app.load_model_blocking();
      ADD_FAILURE() << "a missing draft was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("--draft-model /nonexistent/draft: ", 0), 0u) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos);
    }
    EXPECT_EQ(app.controller().worker(), nullptr);
  }
  // ... the window loads the target without it, says why, and offers no
  // speculative lane (a typed one is refused at prefill).
  {
    App app(spec_options({"greedy"}, test::fixture_model()));  // another vocabulary
    app.load_model_async();
    for (int i = 0; i < 600 && (app.controller().loading() || !app.controller().worker()); ++i)
      app.frame();
    ASSERT_NE(app.controller().worker(), nullptr);
    EXPECT_TRUE(app.controller().draft_name().empty());
    const std::string err = app.controller().error();
    EXPECT_EQ(err.rfind("draft model not loaded: --draft-model ", 0), 0u) << err;
    EXPECT_NE(err.find("vocabulary"), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos);
    app.state().layout_request = "speculative";
    step(app);
    EXPECT_FALSE(app.speculative_panel().view().has_round);
    EXPECT_NE(app.speculative_panel().view().message.find("--draft-model DIR"), std::string::npos);
    EXPECT_EQ(app.last_frame().gl_errors, 0);
  }
}

}  // namespace
}  // namespace ts::app
