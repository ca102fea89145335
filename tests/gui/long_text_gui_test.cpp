// Long text from data never aborts the window (under Xvfb). Dear ImGui, as
// Debian builds it, indexes a panel's vertices with 16 bits: a wrapped text
// of more than about 16,000 characters in one call, or one token piece as
// long, used to end the window on "Too many vertices in ImDrawList using
// 16-bit indices". Each case below is what a user met: a long lesson step, a
// re-opened session with a 20,000-character prompt, a tokenizer with a
// 32,768-character token.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include <imgui_internal.h>

#include "app/app.h"
#include "gui_test_support.h"
#include "lesson/lesson.h"
#include "util/error.h"

namespace ts::app {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  const fs::path dir = fs::temp_directory_path() / ("ts-long-text-" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

// The fixture model with a tokenizer whose merges join runs of 'a' up to
// 32,768 of them into one token (ids 441-455 replaced; the weights are the
// fixture's). A prompt of 20,000 'a' is then 5 tokens, one of 32,768 'a' one.
fs::path long_token_model() {
  const fs::path dir = temp_dir() / "long-token-model";
  if (fs::exists(dir / "merges.txt")) return dir;
  fs::create_directories(dir);
  const fs::path tiny = test::fixture_model();
  fs::copy_file(tiny / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  fs::copy_file(tiny / "model.safetensors", dir / "model.safetensors",
                fs::copy_options::overwrite_existing);
  nlohmann::json vocab;
  std::ifstream(tiny / "vocab.json") >> vocab;
  nlohmann::json out = nlohmann::json::object();
  for (auto it = vocab.begin(); it != vocab.end(); ++it)
    if (it.value().get<int>() < 441 || it.value().get<int>() > 455) out[it.key()] = it.value();
  std::ofstream merges(dir / "merges.txt");
  merges << "#version: 0.2\n";
  for (int k = 1; k <= 15; ++k) {
    const std::string half(std::size_t{1} << (k - 1), 'a');
    out[half + half] = 440 + k;
    merges << half << ' ' << half << '\n';
  }
  std::ofstream(dir / "vocab.json") << out.dump();
  return dir;
}

AppOptions long_token_options(const std::string& layout, const std::string& prompt) {
  AppOptions o = test::fixture_options(layout, prompt);
  o.setup.model = long_token_model();
  return o;
}

void frames(App& app, int n) {
  for (int i = 0; i < n; ++i) app.frame();
}

TEST(LongTextGui, ALessonStepLongerThanTheBarCanShowIsRefusedWithItsLine) {
  REQUIRE_DISPLAY();
  // 400 text lines of 64 bytes: 26 KB in one step, under the file's 64 KiB.
  std::string text = "title: Long\n[step]\n";
  for (int i = 0; i < 400; ++i) text += "text: " + std::string(57, 'w') + " " + "\n";
  const fs::path file = temp_dir() / "long.lesson";
  std::ofstream(file) << text;
  App app(test::fixture_options("lesson"));
  app.load_model_blocking();
  app.settle();
  EXPECT_FALSE(app.start_lesson(file));
  frames(app, 3);
  const std::string& e = app.state().error_text;
  EXPECT_EQ(e.rfind(file.string() + ":2: step 1's text is ", 0), 0u) << e;
  EXPECT_NE(e.find("split it into several steps"), std::string::npos) << e;
  EXPECT_FALSE(app.lesson_panel().active());
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

TEST(LongTextGui, AStepAtTheLimitIsShownWhole) {
  REQUIRE_DISPLAY();
  // The longest text a step may have, in words, with a question and an
  // answer at their limits too: drawn in a short bar, scrolled to its end.
  std::string text = "title: At the limit\n[step]\n";
  std::string words;
  while (words.size() + 6 <= lesson::kMaxStepTextBytes) words += "word ";
  text += "text: " + words + "\n";
  text += "question: " + std::string(lesson::kMaxQuestionBytes - 1, 'q') + "?\n";
  text += "answer: " + std::string(lesson::kMaxQuestionBytes, 'a') + "\n";
  const fs::path file = temp_dir() / "limit.lesson";
  std::ofstream(file) << text;
  App app(test::fixture_options("lesson"));
  app.load_model_blocking();
  app.settle();
  ASSERT_TRUE(app.start_lesson(file)) << app.state().error_text;
  frames(app, 4);
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kLesson));
  ImGui::SetScrollY(ImGui::FindWindowByName(panel_title(PanelId::kLesson)), 1e6f);
  frames(app, 2);
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

TEST(LongTextGui, ATokenOf32768CharactersIsDrawnShortened) {
  REQUIRE_DISPLAY();
  for (const char* layout : {"prompt", "lesson", "classroom"}) {
    SCOPED_TRACE(layout);
    App app(long_token_options(layout, std::string(32768, 'a')));
    app.load_model_blocking();
    app.settle();
    ASSERT_NE(app.controller().snapshot(), nullptr);
    EXPECT_EQ(app.controller().snapshot()->history.size(), 0u);
    frames(app, 3);
    for (int i = 0; i < 3; ++i) {
      app.advance();
      app.settle(2, 100);
    }
    frames(app, 3);
    ASSERT_GE(app.controller().snapshot()->history.size(), 1u);
    EXPECT_EQ(app.controller().snapshot()->prompt_tokens.size(), 1u);
    EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kPrompt));
    EXPECT_EQ(app.last_frame().gl_errors, 0);
  }
}

TEST(LongTextGui, AReopenedSessionWithA20000CharacterPromptIsDrawn) {
  REQUIRE_DISPLAY();
  const fs::path file = temp_dir() / "long-prompt.json";
  {
    App app(long_token_options("classroom", std::string(20000, 'a')));
    app.load_model_blocking();
    app.settle();
    for (int i = 0; i < 4; ++i) {
      app.advance();
      app.settle(2, 100);
    }
    ASSERT_EQ(app.controller().snapshot()->prompt_tokens.size(), 5u);
    app.controller().analysis()->export_json(*app.controller().worker(), file.string());
    app.controller().worker()->wait_idle();
    ASSERT_EQ(app.controller().analysis()->export_message(), "wrote " + file.string());
  }
  for (const char* layout : {"classroom", "prompt", "lesson"}) {
    SCOPED_TRACE(layout);
    AppOptions o = test::fixture_options(layout);
    o.setup = {};
    App app(o);
    app.frame();
    app.open_session(file);
    app.settle();
    ASSERT_TRUE(app.controller().replaying());
    for (int i = 0; i < 4; ++i) {
      app.advance();
      app.settle(2, 50);
    }
    frames(app, 3);
    EXPECT_EQ(app.controller().snapshot()->prompt_text.size(), 20000u);
    EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kPrompt));
    EXPECT_EQ(app.last_frame().gl_errors, 0);
  }
}

}  // namespace
}  // namespace ts::app
