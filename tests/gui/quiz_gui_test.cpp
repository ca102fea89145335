// The quiz panel under Xvfb: a round with known answers. Ask hides the
// Logits and Choosing panels and offers the model's top 5 among 8; a class's
// tally of guesses is scored on Reveal under the step's own logits (recomputed
// here) against the token the step chose, and the panels come back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "app/app.h"
#include "app/render/window.h"
#include "gui_test_support.h"

namespace ts::app {
namespace {

AppOptions options() { return test::fixture_options("classroom", "The cat sat on"); }

// A window on the quiz's prompt with the Quiz panel open (with the others, or
// alone), and the two moves of a round, each waited for.
class GuiQuiz : public ::testing::Test {
 protected:
  void SetUp() override { REQUIRE_DISPLAY(); }

  void open(const AppOptions& o, bool quiz_alone = false) {
    app_ = std::make_unique<App>(o);
    app_->load_model_blocking();
    app_->settle();
    if (quiz_alone) {
      for (int i = 0; i < kNumWindowPanels; ++i)
        app_->state().settings.panel_open(static_cast<PanelId>(i)) = false;
    }
    app_->state().settings.panel_open(PanelId::kQuiz) = true;
    app_->settle(2, 50);
  }

  void ask() {
    quiz().request_ask();
    app_->settle(3, 100);
    ASSERT_TRUE(quiz().asking()) << quiz().error();
  }

  void reveal() {
    quiz().request_reveal();
    app_->settle(3, 100);
    ASSERT_TRUE(quiz().revealed()) << quiz().error();
  }

  App& app() { return *app_; }
  QuizPanel& quiz() { return app_->quiz_panel(); }

 private:
  std::unique_ptr<App> app_;
};

TEST_F(GuiQuiz, ARoundWithKnownAnswersIsScoredAndTheHiddenPanelsReturn) {
  open(options());
  App& app = this->app();
  QuizPanel& quiz = this->quiz();
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kLogits));
  ASSERT_NO_FATAL_FAILURE(ask());  // before prefill: the guess is the prefill's token
  EXPECT_FALSE(app.last_frame().was_drawn(PanelId::kLogits));
  EXPECT_FALSE(app.last_frame().was_drawn(PanelId::kSampling));
  ASSERT_EQ(quiz.shortlist().size(), 8u);
  const SnapshotPtr before = app.controller().snapshot();
  EXPECT_TRUE(before->history.empty());  // asking did not step
  // Asking again gives the same list (same logits, same seed) and still
  // brings the hidden panels back at the reveal.
  const std::vector<QuizOption> first = quiz.shortlist();
  ASSERT_NO_FATAL_FAILURE(ask());
  ASSERT_EQ(quiz.shortlist().size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(quiz.shortlist()[i].token, first[i].token);
  EXPECT_FALSE(app.last_frame().was_drawn(PanelId::kLogits));

  // The class: 3 votes for the shortlist's top-ranked token, 1 for its lowest,
  // and a typed word of several tokens.
  const auto top =
      std::min_element(quiz.shortlist().begin(), quiz.shortlist().end(),
                       [](const QuizOption& a, const QuizOption& b) { return a.rank < b.rank; });
  const auto low =
      std::max_element(quiz.shortlist().begin(), quiz.shortlist().end(),
                       [](const QuizOption& a, const QuizOption& b) { return a.rank < b.rank; });
  EXPECT_EQ(top->rank, 1);
  EXPECT_GE(low->rank, 6);
  for (int i = 0; i < 3; ++i) quiz.vote_token(*before, top->token);
  quiz.vote_token(*before, low->token);
  quiz.vote_word(*before, " elephantine");
  ASSERT_NO_FATAL_FAILURE(reveal());
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kLogits));
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kSampling));

  // Independently: the prefill's logits, softmax here; greedy chose the argmax.
  const SnapshotPtr after = app.controller().snapshot();
  ASSERT_EQ(after->history.size(), 1u);
  const std::vector<float>& logits = after->history[0]->lanes[0].logits;
  const int argmax =
      static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  EXPECT_EQ(quiz.chosen_token(), argmax);
  EXPECT_EQ(top->token, argmax);  // the shortlist's rank 1 is the step's argmax
  long double mx = logits[argmax], sum = 0;
  for (float x : logits) sum += std::exp(static_cast<long double>(x) - mx);
  auto prob = [&](int t) {
    return static_cast<double>(std::exp(static_cast<long double>(logits[t]) - mx) / sum);
  };
  ASSERT_EQ(quiz.results().size(), 3u);
  const auto& r = quiz.results();
  EXPECT_EQ(r[0].votes, 3);
  EXPECT_TRUE(r[0].guess.correct);
  EXPECT_FALSE(r[0].guess.beat_top1);  // greedy: the top-1 was chosen
  EXPECT_EQ(r[0].guess.rank, 1);
  EXPECT_NEAR(r[0].guess.probability, prob(argmax), 1e-9);
  EXPECT_FALSE(r[1].guess.correct);
  EXPECT_EQ(r[1].guess.rank, low->rank);
  EXPECT_NEAR(r[1].guess.probability, prob(low->token), 1e-9);
  EXPECT_NEAR(r[1].guess.surprisal_bits, -std::log2(prob(low->token)), 1e-6);
  const std::vector<int> ids = after->tokenizer->encode_ids(" elephantine");
  EXPECT_EQ(r[2].guess.token, ids[0]);
  EXPECT_EQ(r[2].guess.word_tokens, static_cast<int>(ids.size()));
  EXPECT_GT(r[2].guess.word_tokens, 1);
  // The tally: five guesses, three right.
  EXPECT_EQ(quiz.tally().guesses, 5);
  EXPECT_EQ(quiz.tally().correct, 3);
  const double mean =
      (3 * std::log(prob(argmax)) + std::log(prob(low->token)) + std::log(prob(ids[0]))) / 5;
  EXPECT_NEAR(quiz.tally().mean_log_prob(), mean, 1e-6);
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

TEST_F(GuiQuiz, ClosingThePanelWhileAskingBringsTheHiddenPanelsBack) {
  open(options());
  App& app = this->app();
  QuizPanel& quiz = this->quiz();
  ASSERT_NO_FATAL_FAILURE(ask());
  ASSERT_FALSE(app.last_frame().was_drawn(PanelId::kLogits));
  // The teacher closes the quiz (its window's x) instead of revealing.
  app.state().settings.panel_open(PanelId::kQuiz) = false;
  app.settle(2, 50);
  EXPECT_FALSE(quiz.asking());
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kLogits));
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kSampling));
  EXPECT_TRUE(app.controller().snapshot()->history.empty());  // nothing was stepped
}

// With only the quiz panel on the projector the class still sees what it is
// guessing: the text so far (the prompt, then the prompt and what was
// generated) and a "?" where the next token goes, inside the panel. A typed
// word after that text is scored with its leading space.
TEST_F(GuiQuiz, ThePanelAloneShowsTheTextSoFarAndWhereTheGuessGoes) {
  AppOptions o = options();
  o.presentation = true;  // large type, as on a projector
  open(o, /*quiz_alone=*/true);
  App& app = this->app();
  QuizPanel& quiz = this->quiz();
  auto check_shown = [&](const std::string& expected) {
    ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kQuiz));
    for (int i = 0; i < kNumWindowPanels; ++i) {
      if (static_cast<PanelId>(i) != PanelId::kQuiz) {
        EXPECT_FALSE(app.last_frame().was_drawn(static_cast<PanelId>(i))) << i;
      }
    }
    EXPECT_EQ(quiz.context(), expected);
    EXPECT_EQ(quiz.shown_context(), expected);
    // The guess position is drawn inside the panel's window.
    const PanelBox m = quiz.guess_marker();
    const PanelBox& box = app.last_frame().boxes[static_cast<int>(PanelId::kQuiz)];
    EXPECT_GT(m.w, 0);
    EXPECT_GT(m.h, 0);
    EXPECT_GE(m.x, box.x);
    EXPECT_GE(m.y, box.y);
    EXPECT_LE(m.x + m.w, box.x + box.w);
    EXPECT_LE(m.y + m.h, box.y + box.h);
  };

  // Before prefill: the prompt.
  ASSERT_NO_FATAL_FAILURE(ask());
  check_shown("The cat sat on");
  const SnapshotPtr before = app.controller().snapshot();
  quiz.vote_token(*before, quiz.shortlist()[0].token);
  ASSERT_NO_FATAL_FAILURE(reveal());

  // After the prefill: the prompt and the token it chose.
  const SnapshotPtr mid = app.controller().snapshot();
  ASSERT_EQ(mid->history.size(), 1u);
  const int first = mid->history[0]->lanes[0].chosen_token;
  std::vector<int> ids = mid->tokenizer->encode_ids("The cat sat on");
  ids.push_back(first);
  const std::string so_far = mid->tokenizer->decode(ids);
  ASSERT_NO_FATAL_FAILURE(ask());
  check_shown(so_far);

  // "mat" typed as a word: scored as " mat" when the text ends in a letter,
  // as typed after a space.
  const bool after_space = so_far.back() == ' ';
  const std::string as_scored = after_space ? "mat" : " mat";
  quiz.vote_word(*app.controller().snapshot(), "mat");
  ASSERT_NO_FATAL_FAILURE(reveal());
  ASSERT_EQ(quiz.results().size(), 1u);
  const QuizGuess& g = quiz.results()[0].guess;
  EXPECT_EQ(g.typed, "mat");
  EXPECT_EQ(g.scored_as, as_scored);
  EXPECT_EQ(g.token, mid->tokenizer->encode_ids(as_scored)[0]);
  // After the reveal the panel still shows the text, with the chosen token
  // where the "?" was.
  EXPECT_EQ(quiz.shown_context(), so_far);
  EXPECT_GT(quiz.guess_marker().w, 0);
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

// The window and the CLI's --quiz offer the same shortlist for the same
// prompt and step (the docs promise it): the CLI's printed lists of the
// first three steps, read back, are the window's.
std::vector<std::vector<std::string>> cli_quiz_lists(const std::string& prompt, int steps) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ts_quiz_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream in(dir / "in");
    for (int i = 0; i < steps; ++i) in << "\n\n";  // step, skip the guess
    in << "q\n";
  }
  const std::string cmd = std::string("'") + TS_CLI_PATH + "' --model '" +
                          test::fixture_model().string() + "' --threads 2 --prompt '" + prompt +
                          "' --interactive --quiz <'" + (dir / "in").string() + "' >'" +
                          (dir / "out").string() + "' 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream out(dir / "out");
  std::vector<std::vector<std::string>> lists;
  std::string line;
  bool next_is_list = false;
  const std::regex option(R"re( (\d+) "(.*?)"(?= \d+ "|$))re");
  while (std::getline(out, line)) {
    if (next_is_list) {
      std::vector<std::string> texts;
      for (std::sregex_iterator it(line.begin(), line.end(), option), end; it != end; ++it)
        texts.push_back((*it)[2]);
      lists.push_back(texts);
    }
    next_is_list = line.find("quiz: which token comes after") != std::string::npos;
  }
  std::filesystem::remove_all(dir);
  return lists;
}

TEST_F(GuiQuiz, TheShortlistIsTheCliShortlistForTheSameStep) {
  constexpr int kSteps = 3;
  const std::vector<std::vector<std::string>> cli = cli_quiz_lists("The cat sat on", kSteps);
  ASSERT_EQ(cli.size(), static_cast<size_t>(kSteps));
  open(options());
  for (int s = 0; s < kSteps; ++s) {
    ASSERT_NO_FATAL_FAILURE(ask());
    std::vector<std::string> window;
    for (const QuizOption& o : quiz().shortlist()) window.push_back(o.text);
    EXPECT_EQ(window, cli[s]) << "step " << s;
    ASSERT_NO_FATAL_FAILURE(reveal());
  }
}

}  // namespace
}  // namespace ts::app
