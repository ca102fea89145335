#pragma once
// The last step of choosing a token: the argmax (greedy) or a draw from the
// final distribution with a counter-based random number, so that a step gives
// the same token however often it is re-run, stepped back to or branched from.
#include <cstdint>
#include <vector>

namespace ts {

// SplitMix64's output function (Steele, Lea, Flood 2014): a bijective mix of
// 64 bits.
uint64_t splitmix64(uint64_t x);

// The uniform number in [0, 1) for (seed, step_index): the step_index-th
// output of a SplitMix64 stream whose state starts at splitmix64(seed), top 53
// bits times 2^-53. No state: the same pair always gives the same number.
// Throws ts::Error for a negative step_index.
double uniform_for_step(uint64_t seed, int step_index);

struct DrawRecord {
  bool greedy = true;
  double uniform = 0.0;  // u in [0, 1); 0 and unused when greedy
  int chosen_token = -1;
  float chosen_prob = 0.0f;  // final probability of chosen_token
  // Sampling only: the kept tokens (finite final logits) in draw order, by
  // probability descending, ties by lower id, and the cumulative probability
  // after each, normalised so that the last entry is 1. The chosen token is
  // the first whose cumulative probability is > uniform. Empty when greedy.
  std::vector<int> cdf_tokens;
  std::vector<float> cdf;
};

// Argmax of logits, ties to the lowest id; probs gives chosen_prob. Throws
// ts::Error when no logit is finite or the sizes differ.
DrawRecord draw_greedy(const std::vector<float>& logits, const std::vector<float>& probs);

// Inverse-CDF draw with u over the tokens with finite logits, weighted by
// probs (which need not sum exactly to 1: the walk uses their actual sum).
// When rounding leaves u past the end, the last token with probability > 0 is
// chosen. Throws ts::Error when no token has probability > 0, the sizes
// differ, or u is outside [0, 1).
DrawRecord draw_sample(const std::vector<float>& logits, const std::vector<float>& probs, double u);

}  // namespace ts
