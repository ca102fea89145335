#include "session/quiz.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "model/token_display.h"
#include "sampling/draw.h"
#include "util/error.h"

namespace ts {

namespace {

constexpr double kLn2 = 0.69314718055994530942;

double log_normaliser(const std::vector<float>& logits) {
  double mx = -INFINITY;
  for (float x : logits) {
    if (std::isnan(x) || (std::isinf(x) && x > 0)) throw Error("quiz: the logits are not finite");
    mx = std::max(mx, static_cast<double>(x));
  }
  if (!std::isfinite(mx)) throw Error("quiz: no token has a finite logit");
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  return mx + std::log(sum);
}

int rank_of(const std::vector<float>& logits, int token) {
  return 1 + static_cast<int>(std::count_if(logits.begin(), logits.end(),
                                            [&](float x) { return x > logits[token]; }));
}

}  // namespace

std::vector<QuizOption> quiz_shortlist(const std::vector<float>& logits, const Tokenizer& tokenizer,
                                       uint64_t seed, int top, int distractors, int pool) {
  if (logits.empty()) throw Error("quiz: no logits");
  if (top < 1) throw Error("quiz: the shortlist needs at least one of the model's top tokens");
  if (distractors < 0 || pool < distractors)
    throw Error("quiz: distractors must be between 0 and the pool they are drawn from");
  const double lse = log_normaliser(logits);
  const int v = static_cast<int>(logits.size());
  const int ranked = std::min(v, top + pool);
  std::vector<int> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + ranked, order.end(), [&](int a, int b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  std::vector<int> picked(order.begin(), order.begin() + std::min(top, v));
  // Distractors: a partial Fisher-Yates over ranks top+1 .. top+pool, each
  // swap from the seed's counter-based stream (no hidden state).
  std::vector<int> rest(order.begin() + std::min(top, v), order.begin() + ranked);
  int k = 0;
  for (int d = 0; d < distractors && d < static_cast<int>(rest.size()); ++d) {
    const int n = static_cast<int>(rest.size()) - d;
    const int j = d + std::min(n - 1, static_cast<int>(uniform_for_step(seed, k++) * n));
    std::swap(rest[d], rest[j]);
    picked.push_back(rest[d]);
  }
  // Shuffle the whole list so that position says nothing.
  for (int i = static_cast<int>(picked.size()) - 1; i > 0; --i) {
    const int j = std::min(i, static_cast<int>(uniform_for_step(seed, k++) * (i + 1)));
    std::swap(picked[i], picked[j]);
  }
  std::vector<QuizOption> out;
  for (int t : picked)
    out.push_back({t, display_piece(tokenizer.token_bytes(t)),
                   std::exp(static_cast<double>(logits[t]) - lse), rank_of(logits, t)});
  return out;
}

std::vector<QuizOption> quiz_shortlist_for_step(const std::vector<float>& logits,
                                                const Tokenizer& tokenizer, size_t step) {
  return quiz_shortlist(logits, tokenizer, static_cast<uint64_t>(step));
}

QuizGuess score_guess(const std::vector<float>& logits, const Tokenizer& tokenizer, int token,
                      int chosen) {
  if (token < 0 || token >= static_cast<int>(logits.size()))
    throw Error("quiz: token " + std::to_string(token) + " is outside the vocabulary");
  const double lse = log_normaliser(logits);
  QuizGuess g;
  g.token = token;
  g.text = display_piece(tokenizer.token_bytes(token));
  g.log_prob = static_cast<double>(logits[token]) - lse;
  g.probability = std::exp(g.log_prob);
  g.surprisal_bits = -g.log_prob / kLn2;
  g.rank = rank_of(logits, token);
  g.correct = token == chosen;
  const int top1 =
      static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  g.beat_top1 = g.correct && top1 != chosen;
  return g;
}

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Starts a word that GPT-2 writes with its leading space: a letter, a digit
// or any non-ASCII character (UTF-8 lead byte).
bool starts_word(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || std::isalnum(u);
}

}  // namespace

std::string quiz_word_as_scored(std::string_view word, std::string_view context) {
  if (word.empty() || context.empty() || is_space(context.back()) || !starts_word(word.front()))
    return std::string(word);
  std::string spaced(1, ' ');  // (" " + std::string(word) draws a false -Wrestrict from GCC 12)
  spaced.append(word);
  return spaced;
}

QuizGuess score_typed_guess(const std::vector<float>& logits, const Tokenizer& tokenizer,
                            std::string_view word, int chosen, std::string_view context) {
  if (word.empty()) throw Error("quiz: type a word (or pick a number)");
  const std::string as_scored = quiz_word_as_scored(word, context);
  const std::vector<int> ids = tokenizer.encode_ids(as_scored);
  if (ids.empty()) throw Error("quiz: the word has no tokens");
  QuizGuess g = score_guess(logits, tokenizer, ids[0], chosen);
  g.typed = std::string(word);
  g.scored_as = as_scored;
  g.word_tokens = static_cast<int>(ids.size());
  return g;
}

std::string describe_guess(const QuizGuess& g) {
  char buf[128];
  std::snprintf(buf, sizeof buf, g.probability >= 0.01 ? "p=%.4f" : "p=%.2e", g.probability);
  std::string s = "\"" + g.text + "\": " + buf + ", rank " + std::to_string(g.rank);
  std::snprintf(buf, sizeof buf, ", %.2f bits", g.surprisal_bits);
  s += buf;
  if (!g.typed.empty() && g.scored_as != g.typed)
    s += " (typed \"" + display_piece(g.typed) + "\", scored as \"" + display_piece(g.scored_as) +
         "\": a word after a word carries its leading space)";
  if (g.word_tokens > 1)
    s += " (\"" + display_piece(g.scored_as) + "\" is " + std::to_string(g.word_tokens) +
         " tokens: only its first, \"" + g.text + "\", is scored)";
  if (g.correct) s += g.beat_top1 ? " - right, and the model's top-1 was not" : " - right";
  return s;
}

void QuizTally::add(const QuizGuess& g) {
  ++guesses;
  sum_log_prob += g.log_prob;
  correct += g.correct;
  beat_top1 += g.beat_top1;
}

}  // namespace ts
