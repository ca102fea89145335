#pragma once
// Scoring a given text: how likely the model finds each token of a
// continuation after a prompt. One prefill runs over prompt + continuation
// with the logits of every position kept (row i predicts token i + 1), and
// each continuation token is read off the row before it: its probability
// (softmax in double of the raw logits, no sampling settings), rank,
// surprisal in bits and the model's top alternatives there. Nothing is
// generated and the KV cache is left as it was.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "model/tokenizer.h"

namespace ts {

struct ScoreAlternative {
  int id = -1;
  std::string text;  // display_piece of its bytes
  double probability = 0;
};

struct ScoredToken {
  int id = -1;
  std::string bytes;                    // raw bytes (may be part of a UTF-8 character)
  std::string text;                     // display_piece(bytes): always valid UTF-8
  int position = 0;                     // index in ScoreResult::tokens
  size_t byte_begin = 0, byte_end = 0;  // span in the scored text (the continuation)
  double log_prob = 0;                  // natural log of its probability
  double probability = 0;               // exp(log_prob)
  double surprisal_bits = 0;            // -log2 probability
  int rank = 0;                         // 1 + number of tokens with a strictly larger logit
  std::vector<ScoreAlternative> top;    // the model's most likely tokens at this position
};

struct ScoreResult {
  std::string prompt;
  std::string continuation;  // the scored text
  std::vector<int> tokens;   // everything the prefill ran: context, then scored tokens
  int context_tokens = 0;    // leading tokens that are context only (not scored)
  std::vector<ScoredToken> scored;
  double total_log_prob = 0;  // sum of log_prob (nats)
  double total_bits = 0;      // sum of surprisal_bits
  double perplexity = 0;      // exp(-total_log_prob / scored tokens)
  double seconds = 0;         // wall time of the prefill
};

// Scores `continuation` after `prompt`. The two are tokenized on their own
// and joined (the continuation's tokens are the ones it has written alone,
// as a generated continuation would be). With an empty prompt the
// continuation is a whole text: its first token is the context and every
// later token is scored. `top` alternatives per position (1..100).
// Throws ts::Error with one line for an empty continuation, a text with
// nothing to score, a text longer than the model's context, non-finite
// logits, or a KV cache with no room for the prefill.
ScoreResult score_text(Engine& engine, const Tokenizer& tokenizer, std::string_view prompt,
                       std::string_view continuation, int top = 5);

// Where two scored continuations part: the first scored token (index into
// `scored`) whose id differs, or where one ends before the other.
struct ScoreDifference {
  int index = -1;                  // -1: the same tokens
  const ScoredToken* a = nullptr;  // the token at `index` in each (null past its end)
  const ScoredToken* b = nullptr;
  bool same_context = true;  // false when the contexts (prompt tokens) differ
};
ScoreDifference first_difference(const ScoreResult& a, const ScoreResult& b);

nlohmann::json score_to_json(const ScoreResult& score);
// {"scores": [a, b], "first_difference": {...}}.
nlohmann::json score_comparison_to_json(const ScoreResult& a, const ScoreResult& b);

}  // namespace ts
