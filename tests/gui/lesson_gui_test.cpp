// Guided lessons in the window (under Xvfb): a lesson waits for the action
// each step asks for, outlines its panel, keeps a strip for its bar, refuses a
// malformed file with one line while keeping its state, and can be left.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <imgui.h>
#include <unistd.h>

#include "app/app.h"
#include "app/panels/precision.h"
#include "gui_test_support.h"
#include "lesson/lesson.h"
#include "util/error.h"
#include "util/paths.h"

namespace ts::app {
namespace {

AppOptions options() { return test::fixture_options("lesson"); }

std::filesystem::path write_file(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tokenscope-lesson-gui-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name) << text;
  return dir / name;
}

size_t history(App& app) { return app.controller().snapshot()->history.size(); }

// A window on the lesson layout with a lesson started from a file, after the
// two frames that start the session over and begin the lesson's first step.
class LessonGui : public ::testing::Test {
 protected:
  void SetUp() override { REQUIRE_DISPLAY(); }

  void open_with_lesson(const std::filesystem::path& lesson) {
    app_ = std::make_unique<App>(options());
    app_->load_model_blocking();
    app_->settle();
    ASSERT_TRUE(app_->start_lesson(lesson)) << app_->state().error_text;
    app_->frame();
    app_->frame();
  }

  App& app() { return *app_; }

  std::unique_ptr<App> app_;
};

TEST_F(LessonGui, ALessonAdvancesOnlyOnTheActionItAsksFor) {
  const auto path = write_file("three.lesson", R"(title: Test lesson
[step]
panel: attention
action: step
text: Press Space.
[step]
panel: sampling
action: temperature 0.7
text: Set the temperature to 0.7.
question: Did the logits change?
answer: No.
[step]
text: The end.
)");
  ASSERT_NO_FATAL_FAILURE(open_with_lesson(path));
  App& app = this->app();
  LessonPanel& lesson = app.lesson_panel();
  ASSERT_TRUE(lesson.active());
  EXPECT_EQ(lesson.count(), 3);
  EXPECT_EQ(lesson.index(), 0);
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kLesson));
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kAttention));
  // The bar has its own strip at the bottom: no panel reaches into it.
  const PanelBox bar = app.last_frame().boxes[static_cast<int>(PanelId::kLesson)];
  for (int i = 0; i < kNumWindowPanels; ++i) {
    if (!app.last_frame().drawn[i] || i == static_cast<int>(PanelId::kLesson)) continue;
    const PanelBox& b = app.last_frame().boxes[i];
    EXPECT_LE(b.y + b.h, bar.y + 1.0f) << panel_key(static_cast<PanelId>(i));
  }
  // Step 1 waits for a model step: Next is refused, however often it is pressed.
  EXPECT_FALSE(lesson.action_done());
  EXPECT_FALSE(lesson.next());
  app.frame();
  EXPECT_FALSE(lesson.next());
  EXPECT_EQ(lesson.index(), 0);
  app.frame();
  app.advance();  // Space: the prefill
  app.settle(2, 100);
  ASSERT_EQ(history(app), 1u);
  EXPECT_TRUE(lesson.action_done());
  EXPECT_TRUE(lesson.next());
  app.frame();
  EXPECT_EQ(lesson.index(), 1);
  // Step 2 waits for temperature 0.7: a model step, or another temperature, does not count.
  EXPECT_FALSE(lesson.action_done());
  app.advance();
  app.settle(2, 100);
  EXPECT_FALSE(lesson.action_done());
  SamplingParams p;
  p.do_sample = true;
  p.temperature = 0.9f;
  app.state().strategy = p;
  app.frame();
  EXPECT_FALSE(lesson.action_done());
  EXPECT_FALSE(lesson.next());
  p.temperature = 0.7f;
  app.state().strategy = p;
  app.frame();
  EXPECT_TRUE(lesson.action_done());
  // Back and Next again: a step already done stays done.
  EXPECT_TRUE(lesson.back());
  app.frame();
  EXPECT_EQ(lesson.index(), 0);
  EXPECT_TRUE(lesson.action_done());  // the prefill has run, history only grew
  EXPECT_TRUE(lesson.next());
  app.frame();
  EXPECT_TRUE(lesson.action_done()) << "temperature is still 0.7";
  EXPECT_TRUE(lesson.next());
  app.frame();
  EXPECT_EQ(lesson.index(), 2);
  EXPECT_TRUE(lesson.action_done());  // a reading step
  EXPECT_FALSE(lesson.next());        // the last one
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

// The window made small mid-lesson (three panels fit), the lesson goes on,
// the window grows back: the lesson's layout follows the size both ways, so
// the panels it closed for the small window come back.
TEST_F(LessonGui, AResizeMidLessonGivesThePanelsBack) {
  const auto dir = find_data("lessons");
  ASSERT_FALSE(dir.empty());
  ASSERT_NO_FATAL_FAILURE(open_with_lesson(dir / "2-how-sampling-chooses.lesson"));
  App& app = this->app();
  app.settle(4, 100);
  app.frame();
  LessonPanel& lesson = app.lesson_panel();
  ASSERT_TRUE(lesson.active());
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kAttention));
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kSampling));
  test::resize_window(app, 1000, 560);
  app.settle(3, 50);
  app.frame();
  EXPECT_FALSE(app.last_frame().was_drawn(PanelId::kAttention)) << "a short window shows three";
  app.advance();  // the prefill
  app.settle(2, 100);
  ASSERT_TRUE(lesson.next());
  app.frame();
  app.advance();
  app.settle(2, 100);
  ASSERT_TRUE(lesson.next());
  app.settle(3, 50);
  ASSERT_TRUE(lesson.next());  // greedy: done
  SamplingParams p;
  p.do_sample = true;
  p.temperature = 0.7f;
  app.state().strategy = p;
  app.frame();
  ASSERT_TRUE(lesson.next());
  app.state().strategy.top_p = 0.9f;
  app.frame();
  ASSERT_TRUE(lesson.next());  // the Logits panel's step
  app.settle(3, 50);
  app.frame();
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kLogits));
  EXPECT_FALSE(app.last_frame().was_drawn(PanelId::kSampling));
  test::resize_window(app, 1280, 800);
  app.settle(3, 50);
  app.frame();
  for (PanelId id : {PanelId::kPrompt, PanelId::kTransport, PanelId::kAttention, PanelId::kLogits})
    EXPECT_TRUE(app.last_frame().was_drawn(id)) << panel_key(id);
  EXPECT_EQ(lesson.outlined(), PanelId::kLogits);
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

TEST_F(LessonGui, AMalformedLessonIsOneLineAndTheRunningLessonStays) {
  const auto good = write_file("good.lesson", "title: Good\n[step]\ntext: a\n[step]\ntext: b\n");
  const auto bad = write_file("bad.lesson", "title: Bad\n[step]\ntext: x\naction: fly\n");
  ASSERT_NO_FATAL_FAILURE(open_with_lesson(good));
  App& app = this->app();
  ASSERT_TRUE(app.lesson_panel().next());
  app.frame();
  EXPECT_FALSE(app.start_lesson(bad));
  app.frame();
  const std::string& e = app.state().error_text;
  EXPECT_EQ(e.rfind(bad.string() + ":4: unknown action 'fly'", 0), 0u) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  ASSERT_TRUE(app.lesson_panel().active());
  EXPECT_EQ(app.lesson_panel().lesson()->title, "Good");
  EXPECT_EQ(app.lesson_panel().index(), 1);
  // A folder, a missing file: refused the same way.
  EXPECT_FALSE(app.start_lesson(bad.parent_path()));
  EXPECT_FALSE(app.start_lesson(bad.parent_path() / "missing.lesson"));
  EXPECT_EQ(app.lesson_panel().lesson()->title, "Good");
  // Leaving: the bar goes and the panels take the whole work area again.
  app.lesson_panel().leave();
  app.frame();
  app.frame();
  EXPECT_FALSE(app.lesson_panel().active());
  EXPECT_FALSE(app.last_frame().was_drawn(PanelId::kLesson));
  std::filesystem::remove_all(good.parent_path());
}

TEST_F(LessonGui, ALessonsCompareModelSetsUpTheComparePanelAndWaitsForRun) {
  // The bundled draft, named bare: found in the window's models folder.
  const auto draft = find_data("models") / "tokenscope-tiny-draft";
  ASSERT_TRUE(std::filesystem::exists(draft));
  const auto lesson = write_file("twin.lesson",
                                 "title: Twin\ncompare_model: tokenscope-tiny-draft\n[step]\n"
                                 "panel: precision\naction: compare\ntext: Press Run.\n");
  const auto missing =
      write_file("ghost.lesson", "title: Ghost\n\ncompare_model: no-such-model\n[step]\ntext: x\n");
  app_ = std::make_unique<App>(options());
  App& app = this->app();
  app.load_model_blocking();
  app.settle();
  // A comparison from before the lesson (two formats, run and finished).
  PrecisionPanel& compare = app.precision_panel();
  compare.run(*app.controller().worker(), {WeightFormat::kF32, WeightFormat::kBF16},
              app.controller().snapshot()->prompt_text, 2);
  for (int i = 0; i < 400 && (compare.busy() || !compare.result()); ++i) app.settle(1, 2);
  ASSERT_TRUE(compare.result());
  const int finished = app.state().comparisons_finished;

  ASSERT_TRUE(app.start_lesson(lesson)) << app.state().error_text;
  app.settle(3, 10);
  // The models mode with the lesson's model; the old figures gone, nothing run.
  EXPECT_EQ(compare.mode(), PrecisionPanel::Mode::kModels);
  EXPECT_EQ(compare.model_path(), draft.string());
  EXPECT_FALSE(compare.result());
  EXPECT_FALSE(compare.busy());
  EXPECT_EQ(app.state().comparisons_finished, finished);
  EXPECT_FALSE(app.lesson_panel().action_done());
  EXPECT_TRUE(app.state().settings.panel_open(PanelId::kPrecision));

  // A missing model: one line when the lesson is opened; the window keeps
  // its lesson and the Compare panel its set-up.
  EXPECT_FALSE(app.start_lesson(missing));
  app.frame();
  const std::string& e = app.state().error_text;
  EXPECT_EQ(
      e.rfind(missing.string() + ":3: compare_model: no model 'no-such-model' (looked for ", 0), 0u)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  EXPECT_EQ(app.lesson_panel().lesson()->title, "Twin");
  EXPECT_EQ(compare.model_path(), draft.string());
  std::filesystem::remove_all(lesson.parent_path());
}

TEST_F(LessonGui, TheBundledLessonsStartAndSetTheirPrompt) {
  const auto dir = find_data("lessons");
  ASSERT_FALSE(dir.empty()) << "no lessons folder beside the build (share/tokenscope/lessons)";
  const auto files = lesson::list_lessons(dir);
  ASSERT_GE(files.size(), 3u);
  AppOptions o = options();
  {
    // --lesson with a malformed file stops the launch with its one line.
    AppOptions bad_options = o;
    bad_options.lesson =
        write_file("bad2.lesson", "title: T\n[step]\npanel: nowhere\ntext: x\n").string();
    try {
      App bad(bad_options);
      ADD_FAILURE() << "a malformed --lesson file was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(bad_options.lesson + ":3: unknown panel 'nowhere'", 0),
                0u)
          << e.what();
    }
  }
  o.prompt = "Something else entirely";
  o.lesson = files[0].string();
  App app(o);
  app.load_model_blocking();
  app.settle(4, 100);
  ASSERT_TRUE(app.lesson_panel().active());
  EXPECT_EQ(app.lesson_panel().lesson()->title, "Prefill, decode and the KV cache");
  EXPECT_EQ(app.controller().snapshot()->prompt_text, "Today's weather is so");
  for (const auto& f : files) EXPECT_TRUE(app.start_lesson(f)) << app.state().error_text;
  const char* argv[] = {"tokenscope", "--lesson", "x.lesson"};
  EXPECT_EQ(parse_app_options(3, argv).lesson, "x.lesson");
  EXPECT_NE(app_help().find("--lesson FILE"), std::string::npos);
}

// A bundled lesson that sends the student to "the X panel" names a panel the
// window has: X is a word of a panel's title (the Compare panel's key is
// "precision", but no window is titled Precision).
TEST(LessonText, NamesPanelsByTheirWindowTitles) {
  std::set<std::string> words;
  for (int i = 0; i < kNumPanels; ++i) {
    std::istringstream title(panel_title(static_cast<PanelId>(i)));
    for (std::string w; title >> w;) {
      while (!w.empty() && !std::isalnum(static_cast<unsigned char>(w.back()))) w.pop_back();
      words.insert(w);
    }
  }
  const std::regex mention("[Tt]he ([A-Z][A-Za-z-]*) panel");
  int mentions = 0;
  auto check = [&](const std::string& text, const std::string& where) {
    for (std::sregex_iterator m(text.begin(), text.end(), mention), end; m != end; ++m, ++mentions)
      EXPECT_TRUE(words.count((*m)[1].str())) << where << ": " << m->str();
  };
  const auto dir = find_data("lessons");
  ASSERT_FALSE(dir.empty());
  for (const auto& path : lesson::list_lessons(dir)) {
    std::ifstream in(path);
    check(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()),
          path.filename().string());
  }
  // What a step's action asks for, in the lesson panel's own words.
  for (lesson::ActionKind kind : {lesson::ActionKind::kCompare, lesson::ActionKind::kBatchSweep})
    check(lesson::action_request(lesson::Action{kind}),
          "action " + lesson::action_text(lesson::Action{kind}));
  EXPECT_GT(mentions, 0);
}

}  // namespace
}  // namespace ts::app
