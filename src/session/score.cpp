#include "session/score.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "model/token_display.h"
#include "util/error.h"

namespace ts {

namespace {

constexpr double kLn2 = 0.69314718055994530942;

// The log-normaliser of one row of raw logits, in double: max + log(sum(exp(l - max))).
double log_sum_exp(const float* row, int v) {
  double mx = row[0];
  for (int j = 1; j < v; ++j) mx = std::max(mx, static_cast<double>(row[j]));
  double sum = 0;
  for (int j = 0; j < v; ++j) sum += std::exp(static_cast<double>(row[j]) - mx);
  return mx + std::log(sum);
}

void check_row(const float* row, int v) {
  for (int j = 0; j < v; ++j) {
    if (std::isnan(row[j])) throw Error("score: the model's logits contain NaN");
    if (std::isinf(row[j]) && row[j] > 0) throw Error("score: the model's logits contain +inf");
  }
}

}  // namespace

ScoreResult score_text(Engine& engine, const Tokenizer& tokenizer, std::string_view prompt,
                       std::string_view continuation, int top) {
  if (top < 1 || top > 100) throw Error("score: alternatives per token must be 1..100");
  if (continuation.empty()) throw Error("score: the continuation is empty, nothing to score");
  const int v = engine.config().vocab_size;
  const int n_ctx = engine.config().n_ctx;
  ScoreResult out;
  out.prompt = std::string(prompt);
  out.continuation = std::string(continuation);
  const std::vector<TokenSpan> cont = tokenizer.encode(continuation);
  size_t first_scored = 0;  // index into cont of the first scored token
  if (prompt.empty() && tokenizer.adds_bos()) {
    // A whole text after the BOS token the model is fed first: every token
    // of it is predicted.
    out.tokens = tokenizer.model_input_ids({});
  } else if (prompt.empty()) {
    // A whole text: its first token only gives the context.
    if (cont.size() < 2)
      throw Error(
          "score: the text is a single token and there is no prompt: nothing to predict it "
          "from (give a prompt, or a longer text)");
    first_scored = 1;
  } else {
    out.tokens = tokenizer.model_input_ids(prompt);
  }
  for (const TokenSpan& t : cont) out.tokens.push_back(t.id);
  out.context_tokens = static_cast<int>(out.tokens.size() - (cont.size() - first_scored));
  const int n = static_cast<int>(out.tokens.size());
  if (n > n_ctx)
    throw Error("score: the text is " + std::to_string(n) + " tokens (" +
                std::to_string(out.context_tokens) + " context + " +
                std::to_string(n - out.context_tokens) +
                " scored), longer than the model's context of " + std::to_string(n_ctx));
  for (int id : out.tokens)
    if (id < 0 || id >= v)
      throw Error("score: token id " + std::to_string(id) + " is outside the model's vocabulary");

  // One prefill over everything, logits of every position kept.
  ForwardOptions options;
  options.all_logits = true;
  ForwardResult r = engine.forward_scratch(out.tokens, options);
  out.seconds = r.seconds;
  const std::vector<float>& logits = r.outputs.at(0).logits;
  if (static_cast<int64_t>(logits.size()) != static_cast<int64_t>(n) * v)
    throw Error("score: the engine returned " + std::to_string(logits.size()) +
                " logits, expected one row per token");

  std::vector<int> order(v);
  for (size_t c = first_scored; c < cont.size(); ++c) {
    const int pos = out.context_tokens + static_cast<int>(c - first_scored);
    const float* row = logits.data() + static_cast<size_t>(pos - 1) * v;  // predicts `pos`
    check_row(row, v);
    const double lse = log_sum_exp(row, v);
    ScoredToken t;
    t.id = out.tokens[pos];
    t.bytes = tokenizer.token_bytes(t.id);
    t.text = display_piece(t.bytes);
    t.position = pos;
    t.byte_begin = cont[c].byte_begin;
    t.byte_end = cont[c].byte_end;
    t.log_prob = static_cast<double>(row[t.id]) - lse;
    t.probability = std::exp(t.log_prob);
    t.surprisal_bits = -t.log_prob / kLn2;
    t.rank =
        1 + static_cast<int>(std::count_if(row, row + v, [&](float x) { return x > row[t.id]; }));
    // The most likely tokens here, largest logit first (ties: smaller id first).
    std::iota(order.begin(), order.end(), 0);
    const int k = std::min(top, v);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return row[a] != row[b] ? row[a] > row[b] : a < b; });
    for (int i = 0; i < k; ++i) {
      const int id = order[i];
      t.top.push_back({id, display_piece(tokenizer.token_bytes(id)),
                       std::exp(static_cast<double>(row[id]) - lse)});
    }
    out.total_log_prob += t.log_prob;
    out.total_bits += t.surprisal_bits;
    out.scored.push_back(std::move(t));
  }
  out.perplexity = std::exp(-out.total_log_prob / static_cast<double>(out.scored.size()));
  if (!std::isfinite(out.total_log_prob))
    throw Error("score: a token has probability 0 under the model (log-probability -inf)");
  return out;
}

ScoreDifference first_difference(const ScoreResult& a, const ScoreResult& b) {
  ScoreDifference d;
  d.same_context = std::equal(a.tokens.begin(), a.tokens.begin() + a.context_tokens,
                              b.tokens.begin(), b.tokens.begin() + b.context_tokens);
  const size_t na = a.scored.size(), nb = b.scored.size();
  for (size_t i = 0; i < std::max(na, nb); ++i) {
    const bool differs = i >= na || i >= nb || a.scored[i].id != b.scored[i].id;
    if (!differs) continue;
    d.index = static_cast<int>(i);
    d.a = i < na ? &a.scored[i] : nullptr;
    d.b = i < nb ? &b.scored[i] : nullptr;
    break;
  }
  return d;
}

nlohmann::json score_to_json(const ScoreResult& s) {
  nlohmann::json tokens = nlohmann::json::array();
  for (const ScoredToken& t : s.scored) {
    nlohmann::json top = nlohmann::json::array();
    for (const ScoreAlternative& a : t.top)
      top.push_back({{"id", a.id}, {"text", a.text}, {"probability", a.probability}});
    tokens.push_back({{"id", t.id},
                      {"text", t.text},
                      {"position", t.position},
                      {"byte_begin", t.byte_begin},
                      {"byte_end", t.byte_end},
                      {"probability", t.probability},
                      {"log_prob", t.log_prob},
                      {"rank", t.rank},
                      {"surprisal_bits", t.surprisal_bits},
                      {"top", top}});
  }
  return {{"prompt", s.prompt},
          {"continuation", s.continuation},
          {"token_ids", s.tokens},
          {"context_tokens", s.context_tokens},
          {"tokens", tokens},
          {"scored_tokens", s.scored.size()},
          {"total_log_prob", s.total_log_prob},
          {"total_bits", s.total_bits},
          {"perplexity", s.perplexity},
          {"prefill_seconds", s.seconds}};
}

nlohmann::json score_comparison_to_json(const ScoreResult& a, const ScoreResult& b) {
  const ScoreDifference d = first_difference(a, b);
  nlohmann::json diff = nullptr;
  if (d.index >= 0) {
    auto side = [](const ScoredToken* t) -> nlohmann::json {
      if (!t) return nullptr;
      return {{"id", t->id},
              {"text", t->text},
              {"probability", t->probability},
              {"rank", t->rank},
              {"surprisal_bits", t->surprisal_bits}};
    };
    diff = {{"index", d.index}, {"a", side(d.a)}, {"b", side(d.b)}};
  }
  return {{"scores", {score_to_json(a), score_to_json(b)}},
          {"same_context", d.same_context},
          {"first_difference", diff}};
}

}  // namespace ts
