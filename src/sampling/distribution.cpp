#include "sampling/distribution.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "util/error.h"

namespace ts {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The largest logit (NaN checked); -inf when there is none.
float checked_max(const std::vector<float>& logits) {
  float mx = kNegInf;
  for (float x : logits) {
    if (std::isnan(x)) throw Error("logits contain NaN");
    if (x > mx) mx = x;
  }
  return mx;
}

}  // namespace

std::vector<float> softmax(const std::vector<float>& logits) {
  std::vector<float> probs(logits.size(), 0.0f);
  const float mx = checked_max(logits);
  if (mx == kNegInf) return probs;
  if (std::isinf(mx)) {  // +inf: the mass goes to the +inf entries, equally
    const auto count = std::count(logits.begin(), logits.end(), mx);
    for (size_t i = 0; i < logits.size(); ++i) {
      if (logits[i] == mx) probs[i] = static_cast<float>(1.0 / static_cast<double>(count));
    }
    return probs;
  }
  std::vector<double> e(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    e[i] = std::exp(static_cast<double>(logits[i]) - static_cast<double>(mx));  // exp(-inf) = 0
    sum += e[i];
  }
  for (size_t i = 0; i < logits.size(); ++i) probs[i] = static_cast<float>(e[i] / sum);
  return probs;
}

std::vector<float> log_softmax(const std::vector<float>& logits) {
  std::vector<float> out(logits.size(), kNegInf);
  const float mx = checked_max(logits);
  if (mx == kNegInf) return out;
  if (std::isinf(mx)) {
    const auto count = std::count(logits.begin(), logits.end(), mx);
    for (size_t i = 0; i < logits.size(); ++i) {
      if (logits[i] == mx) out[i] = static_cast<float>(-std::log(static_cast<double>(count)));
    }
    return out;
  }
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - static_cast<double>(mx));
  const double log_z = static_cast<double>(mx) + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) {
    out[i] = static_cast<float>(static_cast<double>(logits[i]) - log_z);
  }
  return out;
}

std::vector<int> top_n(const std::vector<float>& values, int n) {
  if (n <= 0 || values.empty()) return {};
  std::vector<int> idx(values.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto before = [&values](int a, int b) {
    const float va = values[static_cast<size_t>(a)];
    const float vb = values[static_cast<size_t>(b)];
    const bool na = std::isnan(va), nb = std::isnan(vb);
    if (na != nb) return nb;  // the non-NaN one first
    if (!na && va != vb) return va > vb;
    return a < b;
  };
  const size_t m = std::min(static_cast<size_t>(n), values.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(m), idx.end(), before);
  idx.resize(m);
  return idx;
}

double entropy_nats(const std::vector<float>& probs) {
  double h = 0.0;
  for (float p : probs) {
    if (p > 0.0f) h -= static_cast<double>(p) * std::log(static_cast<double>(p));
  }
  return h;
}

}  // namespace ts
