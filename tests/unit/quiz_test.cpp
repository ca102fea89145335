// Guess the next token: the shortlist holds the model's top tokens and
// distractors from lower ranks in a seeded order, and a guess is scored with
// the model's probability, rank and surprisal at that position (checked
// against a softmax recomputed here from the PyTorch reference logits).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "session/model_setup.h"
#include "session/quiz.h"
#include "session/session.h"
#include "test_paths.h"
#include "util/error.h"

namespace ts {
namespace {

struct Fixture {
  Tokenizer tok = Tokenizer::load(test::tiny_model_dir());
  std::vector<float> row;  // PyTorch's logits after "The cat sat on the"
  std::vector<long double> p;
  std::vector<int> by_rank;  // token ids, most likely first
  Fixture() {
    std::ifstream in(test::fixture_dir() / "tiny/reference.json");
    const nlohmann::json c = nlohmann::json::parse(in)["cases"][0];
    row = c["logits"][5].get<std::vector<float>>();
    long double mx = row[0], sum = 0;
    for (float x : row) mx = std::max(mx, static_cast<long double>(x));
    for (float x : row) sum += std::exp(static_cast<long double>(x) - mx);
    for (float x : row) p.push_back(std::exp(static_cast<long double>(x) - mx) / sum);
    for (int i = 0; i < static_cast<int>(row.size()); ++i) by_rank.push_back(i);
    std::stable_sort(by_rank.begin(), by_rank.end(), [&](int a, int b) { return row[a] > row[b]; });
  }
  int rank(int id) const {
    return 1 + static_cast<int>(std::find(by_rank.begin(), by_rank.end(), id) - by_rank.begin());
  }
};

TEST(Quiz, ShortlistIsTheTopFiveAndThreeLowerRankedDistractorsSeeded) {
  const Fixture f;
  const std::vector<QuizOption> list = quiz_shortlist(f.row, f.tok, 7);
  ASSERT_EQ(list.size(), 8u);
  std::set<int> ids, top5(f.by_rank.begin(), f.by_rank.begin() + 5);
  int from_top = 0;
  for (const QuizOption& o : list) {
    ids.insert(o.token);
    EXPECT_EQ(o.rank, f.rank(o.token));
    EXPECT_NEAR(o.probability, static_cast<double>(f.p[o.token]), 1e-12);
    if (top5.count(o.token))
      ++from_top;
    else {
      EXPECT_GE(o.rank, 6);
      EXPECT_LE(o.rank, 50);
    }
  }
  EXPECT_EQ(ids.size(), 8u);
  EXPECT_EQ(from_top, 5);
  // The same seed, the same list; other seeds shuffle differently.
  const std::vector<QuizOption> again = quiz_shortlist(f.row, f.tok, 7);
  int differs = 0;
  for (uint64_t seed = 8; seed < 12; ++seed) {
    const std::vector<QuizOption> other = quiz_shortlist(f.row, f.tok, seed);
    for (size_t i = 0; i < list.size(); ++i) {
      EXPECT_EQ(again[i].token, list[i].token);
      differs += other[i].token != list[i].token;
    }
  }
  EXPECT_GT(differs, 0);
  // The model's top token is not always first.
  bool top_not_first = false;
  for (uint64_t seed = 0; seed < 8; ++seed)
    top_not_first |= quiz_shortlist(f.row, f.tok, seed)[0].token != f.by_rank[0];
  EXPECT_TRUE(top_not_first);
}

TEST(Quiz, AGuessIsScoredWithTheModelsProbabilityRankAndSurprisal) {
  const Fixture f;
  const int top1 = f.by_rank[0], third = f.by_rank[2];
  // Greedy chose the top-1: guessing it is right but beats nothing.
  QuizGuess g = score_guess(f.row, f.tok, top1, top1);
  EXPECT_EQ(g.rank, 1);
  EXPECT_NEAR(g.probability, static_cast<double>(f.p[top1]), 1e-12);
  EXPECT_NEAR(g.surprisal_bits, static_cast<double>(-std::log2(f.p[top1])), 1e-9);
  EXPECT_TRUE(g.correct);
  EXPECT_FALSE(g.beat_top1);
  // A sampled step chose the third: a guess of it beat the model's top-1.
  g = score_guess(f.row, f.tok, third, third);
  EXPECT_EQ(g.rank, 3);
  EXPECT_TRUE(g.beat_top1);
  QuizGuess wrong = score_guess(f.row, f.tok, f.by_rank[40], third);
  EXPECT_EQ(wrong.rank, 41);
  EXPECT_FALSE(wrong.correct);
  QuizTally tally;
  tally.add(g);
  tally.add(wrong);
  EXPECT_EQ(tally.guesses, 2);
  EXPECT_EQ(tally.correct, 1);
  EXPECT_EQ(tally.beat_top1, 1);
  EXPECT_NEAR(tally.mean_log_prob(), (g.log_prob + wrong.log_prob) / 2, 1e-15);
  EXPECT_NEAR(g.log_prob, static_cast<double>(std::log(f.p[third])), 1e-9);
  EXPECT_THROW(score_guess(f.row, f.tok, static_cast<int>(f.row.size()), top1), Error);
}

TEST(Quiz, ATypedWordOfSeveralTokensScoresItsFirstAndSaysSo) {
  const Fixture f;
  const std::string word = " elephantine";
  const std::vector<int> ids = f.tok.encode_ids(word);
  ASSERT_GT(ids.size(), 1u);  // the tiny vocabulary splits it
  const QuizGuess g = score_typed_guess(f.row, f.tok, word, f.by_rank[0], "The cat sat on the");
  EXPECT_EQ(g.token, ids[0]);
  EXPECT_EQ(g.word_tokens, static_cast<int>(ids.size()));
  EXPECT_NEAR(g.probability, static_cast<double>(f.p[ids[0]]), 1e-12);
  const std::string line = describe_guess(g);
  EXPECT_NE(line.find("is " + std::to_string(ids.size()) + " tokens: only its first"),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  // A one-token word says nothing of the kind.
  const QuizGuess one = score_guess(f.row, f.tok, f.by_rank[0], f.by_rank[0]);
  EXPECT_EQ(describe_guess(one).find("only its first"), std::string::npos);
  try {
    score_typed_guess(f.row, f.tok, "", 0, "The cat sat on the");
    ADD_FAILURE() << "an empty word was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  EXPECT_THROW(quiz_shortlist(f.row, f.tok, 1, 0), Error);
  EXPECT_THROW(quiz_shortlist(f.row, f.tok, 1, 5, 4, 3), Error);
  std::vector<float> bad = f.row;
  bad[3] = NAN;
  EXPECT_THROW(quiz_shortlist(bad, f.tok, 1), Error);
}

// The bundled model, as a class uses it: after "It was a very" the class
// types "cold", meaning the word; GPT-2 writes it " cold" (one token with its
// space), while "cold" on its own starts with the token "c". The guess is
// scored as " cold" against the prefill step's own logits, and says so.
TEST(Quiz, ATypedWordAfterAWordIsScoredWithItsLeadingSpace) {
  ModelSetupOptions o;  // no --model: the bundled model
  o.device = "cpu";
  o.cpu_threads = 2;
  const LoadedModel m = load_model_setup(o);
  Session s(m.tokenizer, m.engine, SessionOptions{});
  s.set_prompt("It was a very");
  const StepTrace& step = s.step();
  const LaneStep& lane = step.lanes.at(0);
  const std::string context = m.tokenizer->decode(lane.context_ids);
  ASSERT_EQ(context, "It was a very");
  const std::vector<float>& logits = lane.logits;
  long double mx = logits[0], sum = 0;
  for (float x : logits) mx = std::max(mx, static_cast<long double>(x));
  for (float x : logits) sum += std::exp(static_cast<long double>(x) - mx);
  auto prob = [&](int t) {
    return static_cast<double>(std::exp(static_cast<long double>(logits[t]) - mx) / sum);
  };
  auto rank = [&](int t) {
    int r = 1;
    for (float x : logits) r += x > logits[t];
    return r;
  };
  const std::vector<int> spaced = m.tokenizer->encode_ids(" cold");
  ASSERT_EQ(spaced.size(), 1u);  // " cold" is one GPT-2 token
  ASSERT_NE(m.tokenizer->encode_ids("cold")[0], spaced[0]);

  const QuizGuess g = score_typed_guess(logits, *m.tokenizer, "cold", lane.chosen_token, context);
  EXPECT_EQ(g.token, spaced[0]);
  EXPECT_EQ(g.typed, "cold");
  EXPECT_EQ(g.scored_as, " cold");
  EXPECT_EQ(g.word_tokens, 1);
  EXPECT_NEAR(g.probability, prob(spaced[0]), 1e-9);
  EXPECT_EQ(g.rank, rank(spaced[0]));
  EXPECT_NEAR(g.surprisal_bits, -std::log2(prob(spaced[0])), 1e-6);
  const std::string line = describe_guess(g);
  EXPECT_NE(line.find("scored as \"\xE2\x90\xA3"
                      "cold\""),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find("only its first"), std::string::npos) << line;

  // Typed with its space, the same token, and nothing to say about it.
  const QuizGuess as_typed =
      score_typed_guess(logits, *m.tokenizer, " cold", lane.chosen_token, context);
  EXPECT_EQ(as_typed.token, spaced[0]);
  EXPECT_EQ(describe_guess(as_typed).find("scored as"), std::string::npos);

  // After a context that ends in a space the word is scored as typed.
  const std::string after_space = "It was a very ";
  const QuizGuess bare =
      score_typed_guess(logits, *m.tokenizer, "cold", lane.chosen_token, after_space);
  EXPECT_EQ(bare.token, m.tokenizer->encode_ids("cold")[0]);
  EXPECT_EQ(bare.scored_as, "cold");
  EXPECT_NEAR(bare.probability, prob(bare.token), 1e-9);
  EXPECT_EQ(describe_guess(bare).find("scored as"), std::string::npos);

  // Punctuation is not a word: "." after "very" is the token ".".
  const QuizGuess dot = score_typed_guess(logits, *m.tokenizer, ".", lane.chosen_token, context);
  EXPECT_EQ(dot.token, m.tokenizer->encode_ids(".")[0]);

  // A word of several tokens, given its space: the first token of " " + word
  // is scored, and the line says both things.
  const std::string long_word = "thermodynamically";
  const std::vector<int> ids = m.tokenizer->encode_ids(" " + long_word);
  ASSERT_GT(ids.size(), 1u);
  const QuizGuess several =
      score_typed_guess(logits, *m.tokenizer, long_word, lane.chosen_token, context);
  EXPECT_EQ(several.token, ids[0]);
  EXPECT_EQ(several.word_tokens, static_cast<int>(ids.size()));
  EXPECT_NEAR(several.probability, prob(ids[0]), 1e-9);
  EXPECT_EQ(several.rank, rank(ids[0]));
  const std::string several_line = describe_guess(several);
  EXPECT_NE(several_line.find("scored as"), std::string::npos) << several_line;
  EXPECT_NE(several_line.find("tokens: only its first"), std::string::npos) << several_line;
  EXPECT_EQ(several_line.find('\n'), std::string::npos);

  EXPECT_EQ(quiz_word_as_scored("cold", ""), "cold");  // nothing before it
  EXPECT_EQ(quiz_word_as_scored("cold", "line\n"), "cold");
  EXPECT_EQ(quiz_word_as_scored("'s", "the cat"), "'s");
  EXPECT_EQ(quiz_word_as_scored("7", "room"), " 7");
}

}  // namespace
}  // namespace ts
