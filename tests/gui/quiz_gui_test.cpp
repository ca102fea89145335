// The quiz panel under Xvfb: a round with known answers. Ask hides the
// Logits and Choosing panels and offers the model's top 5 among 8; a class's
// tally of guesses is scored on Reveal under the step's own logits (recomputed
// here) against the token the step chose, and the panels come back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "app/app.h"
#include "app/window.h"
#include "gui_test_support.h"

namespace ts::app {
namespace {

AppOptions options() { return test::fixture_options("classroom", "The cat sat on"); }

TEST(GuiQuiz, ARoundWithKnownAnswersIsScoredAndTheHiddenPanelsReturn) {
  REQUIRE_DISPLAY();
  App app(options());
  app.load_model_blocking();
  app.settle();
  app.state().settings.panel_open(PanelId::kQuiz) = true;
  app.settle(2, 50);
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kLogits));
  QuizPanel& quiz = app.quiz_panel();
  quiz.request_ask();  // before prefill: the guess is the prefill's token
  app.settle(3, 100);
  ASSERT_TRUE(quiz.asking()) << quiz.error();
  EXPECT_FALSE(app.last_frame().was_drawn(PanelId::kLogits));
  EXPECT_FALSE(app.last_frame().was_drawn(PanelId::kSampling));
  ASSERT_EQ(quiz.shortlist().size(), 8u);
  const SnapshotPtr before = app.controller().snapshot();
  EXPECT_TRUE(before->history.empty());  // asking did not step
  // Asking again gives the same list (same logits, same seed) and still
  // brings the hidden panels back at the reveal.
  const std::vector<QuizOption> first = quiz.shortlist();
  quiz.request_ask();
  app.settle(3, 100);
  ASSERT_TRUE(quiz.asking()) << quiz.error();
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
  quiz.request_reveal();
  app.settle(3, 100);
  ASSERT_TRUE(quiz.revealed()) << quiz.error();
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

TEST(GuiQuiz, ClosingThePanelWhileAskingBringsTheHiddenPanelsBack) {
  REQUIRE_DISPLAY();
  App app(options());
  app.load_model_blocking();
  app.settle();
  app.state().settings.panel_open(PanelId::kQuiz) = true;
  app.settle(2, 50);
  QuizPanel& quiz = app.quiz_panel();
  quiz.request_ask();
  app.settle(3, 100);
  ASSERT_TRUE(quiz.asking()) << quiz.error();
  ASSERT_FALSE(app.last_frame().was_drawn(PanelId::kLogits));
  // The teacher closes the quiz (its window's x) instead of revealing.
  app.state().settings.panel_open(PanelId::kQuiz) = false;
  app.settle(2, 50);
  EXPECT_FALSE(quiz.asking());
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kLogits));
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kSampling));
  EXPECT_TRUE(app.controller().snapshot()->history.empty());  // nothing was stepped
}

}  // namespace
}  // namespace ts::app
