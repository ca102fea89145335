#include "sampling/logits_processors.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "util/error.h"

namespace ts {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kFloatMax = std::numeric_limits<float>::max();

// Writes logits computed in double back as floats: clamped to the float
// range, as before, which for values that fit is the plain conversion HF
// transformers computes. Clamping alone would break the order in two cases
// (temperature 1e-38, repetition penalty 1e-45): two or more values above
// FLT_MAX all become FLT_MAX, a tie among the top tokens that sampling then
// draws from uniformly; and when every value is below -FLT_MAX all of them
// tie. Then every value is first shifted by a common amount (the top to
// FLT_MAX, or to 0 in the second case). Softmax, argmax and the top-k /
// top-p / min-p filters do not change under a common shift, so the
// probabilities stay the exact ones: a token that still lands beyond
// -FLT_MAX had probability exp(-huge) = 0 anyway.
void store_keeping_order(std::vector<float>& logits, const std::vector<double>& values) {
  auto clamped = [](double v) { return static_cast<float>(std::clamp(v, -kFloatMax, kFloatMax)); };
  double mx = -std::numeric_limits<double>::infinity();
  int at_top = 0;  // values that clamping puts at FLT_MAX
  for (double v : values) {
    if (!std::isfinite(v)) continue;  // -inf stays removed
    mx = std::max(mx, v);
    at_top += clamped(v) == static_cast<float>(kFloatMax) ? 1 : 0;
  }
  double shift = 0.0;
  if (mx > kFloatMax && at_top >= 2)
    shift = mx - kFloatMax;
  else if (mx < -kFloatMax)
    shift = mx;
  for (size_t i = 0; i < values.size(); ++i)
    if (std::isfinite(values[i])) logits[i] = clamped(values[i] - shift);
}

std::string num(float v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

}  // namespace

void apply_repetition_penalty(std::vector<float>& logits, const std::vector<int>& context_ids,
                              float penalty) {
  if (!(std::isfinite(penalty) && penalty > 0.0f)) {
    throw Error("repetition_penalty must be a finite number > 0 (got " + num(penalty) + ")");
  }
  const size_t vocab = logits.size();
  for (int id : context_ids) {
    if (id < 0 || static_cast<size_t>(id) >= vocab) {
      throw Error("repetition_penalty: context token id " + std::to_string(id) +
                  " is outside the vocabulary of " + std::to_string(vocab) + " tokens");
    }
  }
  if (penalty == 1.0f) return;
  std::vector<double> values(logits.begin(), logits.end());
  std::vector<char> done(vocab, 0);
  for (int id : context_ids) {
    const auto i = static_cast<size_t>(id);
    if (done[i]) continue;  // once per distinct token, however often it occurs
    done[i] = 1;
    const double x = logits[i];
    if (!std::isfinite(x)) continue;  // -inf stays removed
    if (x > 0.0) {
      values[i] = x / penalty;
    } else if (x < 0.0) {
      values[i] = x * penalty;
    }
  }
  store_keeping_order(logits, values);
}

void apply_temperature(std::vector<float>& logits, float temperature) {
  if (!(std::isfinite(temperature) && temperature > 0.0f)) {
    throw Error("temperature must be a finite number > 0 (got " + num(temperature) + ")");
  }
  if (temperature == 1.0f) return;
  std::vector<double> values(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    values[i] = static_cast<double>(logits[i]) / temperature;
  store_keeping_order(logits, values);
}

void apply_top_k(std::vector<float>& logits, int k) {
  if (k < 0) throw Error("top_k must be >= 0 (got " + std::to_string(k) + ")");
  if (k == 0 || static_cast<size_t>(k) >= logits.size()) return;
  std::vector<float> sorted = logits;
  auto kth = sorted.begin() + (k - 1);
  std::nth_element(sorted.begin(), kth, sorted.end(), std::greater<float>());
  const float threshold = *kth;  // the k-th largest logit
  for (float& x : logits) {
    if (x < threshold) x = kNegInf;
  }
}

void apply_top_p(std::vector<float>& logits, float top_p) {
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    throw Error("top_p must be in (0, 1] (got " + num(top_p) + ")");
  }
  if (top_p == 1.0f) return;
  // (logit, id) pairs sorted by descending logit = descending probability, ties
  // by lower id; sorting the values themselves keeps the sort cache-friendly.
  std::vector<std::pair<float, int>> order;
  order.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i])) order.emplace_back(logits[i], static_cast<int>(i));
  }
  if (order.size() <= 1) return;
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  const double mx = order.front().first;
  std::vector<double> e(order.size());
  double sum = 0.0;
  for (size_t r = 0; r < order.size(); ++r) {
    e[r] = std::exp(static_cast<double>(order[r].first) - mx);
    sum += e[r];
  }
  double above = 0.0;  // probability of the tokens ranked above position r
  for (size_t r = 0; r < order.size(); ++r) {
    if (r > 0 && above >= static_cast<double>(top_p)) {
      logits[static_cast<size_t>(order[r].second)] = kNegInf;
    }
    above += e[r] / sum;
  }
}

void apply_min_p(std::vector<float>& logits, float min_p) {
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    throw Error("min_p must be in [0, 1] (got " + num(min_p) + ")");
  }
  if (min_p == 0.0f) return;
  float mx = kNegInf;
  for (float x : logits) mx = std::max(mx, x);
  if (!std::isfinite(mx)) return;
  // p_i / p_max = exp(x_i - x_max): the normaliser cancels, so no rounding of it.
  for (float& x : logits) {
    if (std::isfinite(x) && std::exp(static_cast<double>(x) - mx) < static_cast<double>(min_p)) {
      x = kNegInf;
    }
  }
}

}  // namespace ts
