#pragma once
// Guess the next token: the logic of the quiz, with no front end in it.
// Before a step is revealed the player picks from a shortlist (the model's
// top tokens mixed with a few plausible distractors from lower ranks,
// shuffled with a seed) or types a word; on reveal each guess is scored under
// the model's raw distribution at that position: probability, rank and
// surprisal in bits, and whether it is the token the step chose.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer.h"

namespace ts {

struct QuizOption {
  int token = -1;
  std::string text;  // display_piece of its bytes
  double probability = 0;
  int rank = 0;  // 1 + number of tokens with a strictly larger logit
};

// `top` tokens of the largest logits (ties: smaller id first) and
// `distractors` tokens drawn without replacement from the next `pool` ranks
// (top+1 .. top+pool), in an order shuffled by `seed`. The same logits and
// seed always give the same list. Throws ts::Error for top < 1, distractors
// < 0, pool < distractors or logits that are empty or not finite.
std::vector<QuizOption> quiz_shortlist(const std::vector<float>& logits, const Tokenizer& tokenizer,
                                       uint64_t seed, int top = 5, int distractors = 3,
                                       int pool = 45);
// The shortlist offered for the step at history index `step` (the number of
// steps taken before it: 0 is the prefill), seeded by that index. The window
// and the CLI both call this, so the same prompt and step offer the same list.
std::vector<QuizOption> quiz_shortlist_for_step(const std::vector<float>& logits,
                                                const Tokenizer& tokenizer, size_t step);

struct QuizGuess {
  std::string typed;       // what the player typed (empty for a pick by number)
  std::string scored_as;   // the text tokenized: `typed`, or " " + typed (see quiz_word_as_scored)
  int token = -1;          // the token scored
  std::string text;        // its display_piece
  int word_tokens = 1;     // tokens the typed word is; > 1: only its first is scored
  double probability = 0;  // under the model's raw logits (softmax in double)
  double log_prob = 0;     // natural log
  double surprisal_bits = 0;
  int rank = 0;
  bool correct = false;    // it is the token the step chose
  bool beat_top1 = false;  // correct, and the model's own top-1 token was not chosen
};

// Scores `token` as a guess at a position with these logits, where the step
// chose `chosen`. Throws ts::Error for an id outside the logits.
QuizGuess score_guess(const std::vector<float>& logits, const Tokenizer& tokenizer, int token,
                      int chosen);
// The text a typed word is scored as after `context` (the text so far).
// GPT-2's word tokens carry their leading space (" cold", not "cold"), and a
// class typing a guess types the word alone: when the context does not end
// in whitespace and the word starts with a letter, a digit or a non-ASCII
// character, a space is put in front of it. A word that starts with a space
// or punctuation (",", "'s", "."), an empty context and a context that ends
// in whitespace keep the word as typed.
std::string quiz_word_as_scored(std::string_view word, std::string_view context);
// A typed word after `context`: tokenized as quiz_word_as_scored says; its
// first token is scored and word_tokens says how many it has. Throws
// ts::Error for an empty word.
QuizGuess score_typed_guess(const std::vector<float>& logits, const Tokenizer& tokenizer,
                            std::string_view word, int chosen, std::string_view context);

// One line for a scored guess, e.g.
//   "␣warm": p=0.0120, rank 7, 6.38 bits
// and, for a typed word given a leading space, what it was scored as, and
// for a word of several tokens, which token was scored.
std::string describe_guess(const QuizGuess& guess);

// The running score of a player or a class.
struct QuizTally {
  int guesses = 0;
  double sum_log_prob = 0;  // of every guess
  int correct = 0;          // guesses that were the chosen token
  int beat_top1 = 0;        // of those, when the model's top-1 was not chosen
  void add(const QuizGuess& g);
  double mean_log_prob() const { return guesses ? sum_log_prob / guesses : 0.0; }
};

}  // namespace ts
