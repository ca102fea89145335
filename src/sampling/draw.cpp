#include "sampling/draw.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "util/error.h"

namespace ts {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // SplitMix64's increment

void check_sizes(const std::vector<float>& logits, const std::vector<float>& probs) {
  if (logits.size() != probs.size() || logits.empty()) {
    throw Error("draw: logits (" + std::to_string(logits.size()) + ") and probabilities (" +
                std::to_string(probs.size()) + ") must be non-empty and the same size");
  }
}

}  // namespace

uint64_t splitmix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double uniform_for_step(uint64_t seed, int step_index) {
  if (step_index < 0) throw Error("sampling: step index must be >= 0");
  const uint64_t state = splitmix64(seed);
  const uint64_t bits = splitmix64(state + (static_cast<uint64_t>(step_index) + 1) * kGolden);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

DrawRecord draw_greedy(const std::vector<float>& logits, const std::vector<float>& probs) {
  check_sizes(logits, probs);
  int best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) continue;
    if (best < 0 || logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int>(i);
  }
  if (best < 0) throw Error("draw: no finite logit to choose from");
  DrawRecord d;
  d.greedy = true;
  d.chosen_token = best;
  d.chosen_prob = probs[static_cast<size_t>(best)];
  return d;
}

DrawRecord draw_sample(const std::vector<float>& logits, const std::vector<float>& probs,
                       double u) {
  check_sizes(logits, probs);
  if (!(u >= 0.0 && u < 1.0)) throw Error("draw: uniform number must be in [0, 1)");
  DrawRecord d;
  d.greedy = false;
  d.uniform = u;
  // (probability, id) pairs: descending probability, ties by lower id. The
  // order is sorted as one 64-bit key per token (the bits of a non-negative
  // float order like the float; complemented for descending, the id below):
  // the same order as comparing the pairs, a few times faster on a
  // vocabulary-sized row, which every sampled step sorts.
  std::vector<uint64_t> keys;
  keys.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) continue;
    const float p = probs[i];
    const uint32_t bits = p > 0.0f ? std::bit_cast<uint32_t>(p) : 0u;  // -0 and 0 tie
    keys.push_back((static_cast<uint64_t>(~bits) << 32) | static_cast<uint32_t>(i));
  }
  std::sort(keys.begin(), keys.end());
  std::vector<std::pair<float, int>> ranked;
  ranked.reserve(keys.size());
  for (uint64_t k : keys) {
    const int id = static_cast<int>(k & 0xffffffffu);
    ranked.emplace_back(probs[static_cast<size_t>(id)], id);
  }
  double total = 0.0;
  for (const auto& [p, id] : ranked) total += p;
  if (!(total > 0.0)) throw Error("draw: no token has a probability > 0");

  const double target = u * total;
  d.cdf_tokens.resize(ranked.size());
  d.cdf.resize(ranked.size());
  double cum = 0.0;
  size_t last_positive = 0;
  for (size_t r = 0; r < ranked.size(); ++r) {
    const float p = ranked[r].first;
    d.cdf_tokens[r] = ranked[r].second;
    cum += p;
    d.cdf[r] = static_cast<float>(cum / total);
    if (p > 0.0f) last_positive = r;
    if (d.chosen_token < 0 && cum > target) d.chosen_token = ranked[r].second;
  }
  d.cdf.back() = 1.0f;
  if (d.chosen_token < 0) d.chosen_token = d.cdf_tokens[last_positive];  // rounding guard
  d.chosen_prob = probs[static_cast<size_t>(d.chosen_token)];
  return d;
}

}  // namespace ts
