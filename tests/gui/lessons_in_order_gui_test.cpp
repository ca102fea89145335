// The seven shipped lessons, run one after another in one window as a class
// would (under Xvfb), at 1280x720 and 1920x1080, presentation mode on and off.
// Lessons 1-6 run on the test fixture; lesson 7 compares the bundled GPT-2
// with its Llama-shaped twin, so the window loads the bundled model first
// (File > Load model) and needs assets/models/tokenscope-tiny-llama.
// At every step: the panel the step names is open, drawn inside the window
// and outlined, and the state its text describes holds (the lanes, lane 0's
// strategy, the KV cache switch); then the class does what the step asks and
// goes on.
#include <gtest/gtest.h>

#include <imgui.h>

#include <string>
#include <tuple>
#include <vector>

#include "app/app.h"
#include "app/panels/kv.h"
#include "app/panels/lanes.h"
#include "app/panels/precision.h"
#include "app/panels/roofline.h"
#include "gui_test_support.h"
#include "lesson/lesson.h"
#include "session/model_setup.h"
#include "util/paths.h"

namespace ts::app {
namespace {

// What a step's text says of the session when the step begins.
struct State {
  int lanes = 1;              // lanes set up (before the prefill) or running
  bool lane0_sample = false;  // lane 0 samples (else greedy)
  float temperature = 1.0f;   // lane 0's
  float top_p = 1.0f;         // lane 0's
  bool lane1_contrastive = false;
  bool lane1_lookahead = false;  // and lane 2 prompt lookup
  bool kv = true;                // the Step control's KV cache box
};

// Per lesson file, per step: the state at its start.
std::vector<State> expected(const std::string& file, int steps) {
  std::vector<State> s(steps);
  if (file == "2-how-sampling-chooses.lesson") {
    // 1 prefill, 2 step, 3 greedy, 4 temperature 0.7, 5 top-p 0.9, 6 logits.
    for (int i = 4; i < steps; ++i) s[i].lane0_sample = true, s[i].temperature = 0.7f;
    for (int i = 5; i < steps; ++i) s[i].top_p = 0.9f;
  } else if (file == "3-why-decode-is-memory-bound.lesson") {
    // Step 5 turns the cache off (Reset, untick); it stays off to the end.
    for (int i = 5; i < steps; ++i) s[i].kv = false;
  } else if (file == "4-greedy-vs-contrastive.lesson") {
    // Step 1 adds a contrastive lane beside greedy lane 0.
    for (int i = 1; i < steps; ++i) s[i].lanes = 2, s[i].lane1_contrastive = true;
  } else if (file == "5-no-draft-model-needed.lesson") {
    // Step 1 adds a lookahead and a prompt-lookup lane beside greedy lane 0.
    for (int i = 1; i < steps; ++i) s[i].lanes = 3, s[i].lane1_lookahead = true;
  }
  return s;
}

void settle(App& app) {
  app.settle(3, 100);
  app.frame();
  app.frame();
}

void expect_state(App& app, const State& want) {
  const SnapshotPtr snap = app.controller().snapshot();
  ASSERT_NE(snap, nullptr);
  std::vector<SamplingParams> lanes;
  if (snap->lanes.empty()) {
    lanes = app.state().strategies();
  } else {
    for (const Lane& l : snap->lanes) lanes.push_back(l.params);
  }
  ASSERT_EQ(static_cast<int>(lanes.size()), want.lanes);
  EXPECT_EQ(lanes[0].do_sample, want.lane0_sample);
  EXPECT_FALSE(lanes[0].contrastive());
  EXPECT_FALSE(lanes[0].beam_search());
  if (want.lane0_sample) {
    EXPECT_NEAR(lanes[0].temperature, want.temperature, 1e-4);
    EXPECT_NEAR(lanes[0].top_p, want.top_p, 1e-4);
  }
  if (want.lanes > 1) {
    EXPECT_EQ(lanes[1].contrastive(), want.lane1_contrastive);
    EXPECT_EQ(lanes[1].lookahead_on, want.lane1_lookahead);
  }
  if (want.lane1_lookahead) {
    ASSERT_GE(lanes.size(), 3u);
    EXPECT_TRUE(lanes[2].prompt_lookup_on);
  }
  EXPECT_EQ(snap->kv_cache, want.kv);
}

// The class does what the step asks, as the window's controls do it.
void act(App& app, const lesson::Step& step, const std::string& file, int index) {
  AppState& st = app.state();
  auto choose = [&](SamplingParams p) {
    st.strategy = p;
    st.view_step = -1;
    app.controller().choose_with(st.lane, p);
    settle(app);
  };
  switch (step.action.kind) {
    case lesson::ActionKind::kNext:
      break;
    case lesson::ActionKind::kPrefill:
    case lesson::ActionKind::kStep: {
      // Lesson 5's fifth step says "two more decode steps".
      const int n = file == "4-greedy-vs-contrastive.lesson" && index == 2   ? 6
                    : file == "5-no-draft-model-needed.lesson" && index == 4 ? 2
                                                                             : 1;
      for (int i = 0; i < n; ++i) {
        app.advance();
        settle(app);
      }
      break;
    }
    case lesson::ActionKind::kBack:
      app.back();
      settle(app);
      break;
    case lesson::ActionKind::kGreedy:
      choose(SamplingParams{});
      break;
    case lesson::ActionKind::kTemperature: {
      SamplingParams p = st.strategy;
      p.do_sample = true;
      p.temperature = static_cast<float>(step.action.value);
      choose(p);
      break;
    }
    case lesson::ActionKind::kTopP: {
      SamplingParams p = st.strategy;
      p.do_sample = true;
      p.top_p = static_cast<float>(step.action.value);
      choose(p);
      break;
    }
    case lesson::ActionKind::kTopK: {
      SamplingParams p = st.strategy;
      p.do_sample = true;
      p.top_k = static_cast<int>(step.action.value);
      choose(p);
      break;
    }
    case lesson::ActionKind::kKvCache:
      // "press Reset in the Step control, then untick KV cache"
      app.controller().reset(st.strategies());
      app.controller().set_kv_cache(step.action.on);
      settle(app);
      break;
    case lesson::ActionKind::kClickToken: {
      // "Click lane 1 ..., then click its newest token in the token strip"
      select_lane(st, app.controller().snapshot().get(), 1);
      settle(app);
      const SnapshotPtr snap = app.controller().snapshot();
      st.attention.query = static_cast<int>(snap->prompt_tokens.size());
      settle(app);
      break;
    }
    case lesson::ActionKind::kCacheCompare:
      app.controller().analysis()->compare_cache(*app.controller().worker(), 8, st.strategy);
      app.controller().worker()->wait_idle();
      settle(app);
      break;
    case lesson::ActionKind::kCompare: {
      PrecisionPanel& compare = app.precision_panel();
      if (file == "7-what-changed-since-gpt-2.lesson") {
        // "The Compare panel is set to two models ... Press Run": the
        // lesson set the panel up; Run runs what its path field says.
        EXPECT_EQ(compare.mode(), PrecisionPanel::Mode::kModels);
        EXPECT_EQ(compare.model_path(), (find_data("models") / "tokenscope-tiny-llama").string());
        EXPECT_FALSE(compare.result()) << "run before the class pressed Run";
        compare.run_models(*app.controller().worker(), compare.model_path(),
                           app.controller().snapshot()->prompt_text, 4);
        for (int i = 0; i < 400 && (compare.busy() || !compare.result()); ++i) app.settle(1, 2);
        ASSERT_FALSE(compare.busy());
        EXPECT_EQ(compare.error(), "");
        ASSERT_TRUE(compare.result());
        EXPECT_TRUE(compare.result()->models);
        EXPECT_EQ(compare.result()->labels.compared, "tokenscope-tiny-llama");
        settle(app);
        break;
      }
      // "set the reference to f32 and the other format to bf16 (then q4),
      // press Run".
      const WeightFormat other = index == 3 ? WeightFormat::kBF16 : WeightFormat::kQ4;
      compare.run(*app.controller().worker(), {WeightFormat::kF32, other},
                  app.controller().snapshot()->prompt_text, 4);
      for (int i = 0; i < 400 && (compare.busy() || !compare.result()); ++i) app.settle(1, 2);
      ASSERT_FALSE(compare.busy());
      EXPECT_EQ(compare.error(), "");
      settle(app);
      break;
    }
    case lesson::ActionKind::kBatchSweep: {
      // "press Batch sweep" (two batch sizes keep the test short); the
      // panel runs one batch size per frame that sees the last one done.
      RooflinePanel& roofline = app.roofline_panel();
      roofline.request_batch_sweep({1, 2});
      for (int i = 0; i < 400; ++i) {
        app.frame();
        app.controller().worker()->wait_idle();
        if (roofline.batch_sweep() && roofline.batch_sweep()->status().done) break;
      }
      ASSERT_TRUE(roofline.batch_sweep() && roofline.batch_sweep()->status().done);
      settle(app);
      break;
    }
  }
}

using Param = std::tuple<int, int, bool>;  // width, height, presentation

class LessonsInOrder : public ::testing::TestWithParam<Param> {};

TEST_P(LessonsInOrder, EveryStepShowsItsPanelAndTheStateItsTextDescribes) {
  REQUIRE_DISPLAY();
  const auto [w, h, presentation] = GetParam();
  const auto dir = find_data("lessons");
  ASSERT_FALSE(dir.empty()) << "no lessons folder beside the build";
  const auto files = lesson::list_lessons(dir);
  ASSERT_EQ(files.size(), 7u);
  AppOptions o = test::fixture_options("classroom");
  o.width = w;
  o.height = h;
  o.presentation = presentation;
  App app(o);
  app.load_model_blocking();
  app.settle();
  test::resize_window(app, w, h);
  LessonPanel& lesson = app.lesson_panel();
  for (const auto& path : files) {
    const std::string file = path.filename().string();
    const bool lesson7 = file == "7-what-changed-since-gpt-2.lesson";
    if (lesson7) {
      // "The session's model is the bundled GPT-2 (if another model is
      // open, ... load assets/models/tokenscope-tiny with File > Load model)".
      app.load_model(default_model_path());
      for (int i = 0; i < 600 && (app.controller().loading() ||
                                  app.controller().snapshot()->model_name != "tokenscope-tiny");
           ++i)
        app.settle(1, 5);
      ASSERT_EQ(app.controller().snapshot()->model_name, "tokenscope-tiny");
      settle(app);
    }
    ASSERT_TRUE(app.start_lesson(path)) << app.state().error_text;
    settle(app);
    ASSERT_TRUE(lesson.active());
    const lesson::Lesson l = *lesson.lesson();
    const std::vector<State> want = expected(file, static_cast<int>(l.steps.size()));
    for (int i = 0; i < static_cast<int>(l.steps.size()); ++i) {
      SCOPED_TRACE(file + ", step " + std::to_string(i + 1));
      ASSERT_EQ(lesson.index(), i);
      const lesson::Step& step = l.steps[i];
      EXPECT_EQ(app.state().error_text, "");
      // A step that asks for an action is not done before the class does it.
      if (step.action.kind != lesson::ActionKind::kNext &&
          step.action.kind != lesson::ActionKind::kGreedy) {
        EXPECT_FALSE(lesson.action_done()) << "done before: " << lesson::action_text(step.action);
      }
      PanelId id;
      if (!step.panel.empty() && parse_panel_key(step.panel, id)) {
        EXPECT_TRUE(app.state().settings.panel_open(id)) << step.panel;
        EXPECT_TRUE(app.last_frame().was_drawn(id)) << step.panel;
        EXPECT_EQ(lesson.outlined(), id) << step.panel;
        const PanelBox& b = app.last_frame().boxes[static_cast<int>(id)];
        const PanelBox& bar = app.last_frame().boxes[static_cast<int>(PanelId::kLesson)];
        EXPECT_GE(b.x, -0.5f) << step.panel;
        EXPECT_GE(b.y, -0.5f) << step.panel;
        EXPECT_LE(b.x + b.w, w + 0.5f) << step.panel;
        EXPECT_LE(b.y + b.h, bar.y + 1.0f) << step.panel << " runs under the lesson bar";
      }
      expect_state(app, want[i]);
      if (lesson7 && step.panel == "kv") {
        // The lesson quotes the KV panel's bytes-per-token lines: GPT-2's
        // alone before the comparison, then each loaded model's.
        const auto& lines = app.kv_cache_panel().token_bytes_drawn();
        ASSERT_EQ(lines.size(), i < 3 ? 1u : 2u);
        EXPECT_EQ(lines[0].per_token, 8192);
        if (lines.size() == 2) {
          EXPECT_EQ(lines[1].per_token, 2048);
        }
        EXPECT_NE(step.text.find(lines.back().text), std::string::npos)
            << "the step does not quote: " << lines.back().text;
      }
      if (file == "4-greedy-vs-contrastive.lesson" && i == 0) {
        // "click "contrastive 4" after "Add a lane:"": the button is in view.
        ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kLanes));
        const PanelBox& lanes = app.last_frame().boxes[static_cast<int>(PanelId::kLanes)];
        const PanelBox button = app.lanes_panel().preset_box("contrastive 4");
        EXPECT_GT(button.w, 0.0f);
        EXPECT_GE(button.x, lanes.x);
        EXPECT_LE(button.x + button.w, lanes.x + lanes.w) << "the button is clipped";
        EXPECT_LE(button.y + button.h, lanes.y + lanes.h) << "the button is below the panel";
        app.state().lane_setup = app.state().strategies();
        app.state().lane_setup.push_back(parse_strategy("contrastive=4,alpha=0.6"));
        settle(app);
      }
      if (file == "5-no-draft-model-needed.lesson" && i == 0) {
        // "click "lookahead" and then "prompt lookup" after "Add a lane:"".
        ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kLanes));
        const PanelBox& lanes = app.last_frame().boxes[static_cast<int>(PanelId::kLanes)];
        for (const char* label : {"lookahead", "prompt lookup"}) {
          const PanelBox button = app.lanes_panel().preset_box(label);
          EXPECT_GT(button.w, 0.0f) << label;
          EXPECT_GE(button.x, lanes.x) << label;
          EXPECT_LE(button.x + button.w, lanes.x + lanes.w) << label << " is clipped";
          EXPECT_LE(button.y + button.h, lanes.y + lanes.h) << label << " is below the panel";
        }
        app.state().lane_setup = app.state().strategies();
        app.state().lane_setup.push_back(parse_strategy("lookahead"));
        app.state().lane_setup.push_back(parse_strategy("prompt_lookup"));
        settle(app);
      }
      act(app, step, file, i);
      EXPECT_TRUE(lesson.action_done()) << lesson::action_text(step.action);
      if (i + 1 < static_cast<int>(l.steps.size())) {
        ASSERT_TRUE(lesson.next());
        settle(app);
      }
    }
    EXPECT_EQ(app.last_frame().gl_errors, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(SizesAndPresentation, LessonsInOrder,
                         ::testing::Values(Param{1280, 720, false}, Param{1280, 720, true},
                                           Param{1920, 1080, false}, Param{1920, 1080, true}),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::to_string(std::get<0>(info.param)) + "x" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_presentation" : "_window");
                         });

}  // namespace
}  // namespace ts::app
