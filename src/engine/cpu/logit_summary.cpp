#include "engine/cpu/logit_summary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "util/error.h"

namespace ts::cpu {

LogitSummary summarize_logits(const float* logits, int vocab, int k) {
  if (vocab < 1 || k < 1 || k > vocab)
    throw Error("summarize_logits: k must be in 1.." + std::to_string(vocab) + " (got " +
                std::to_string(k) + ")");
  auto clean = [&](int i) {
    const float v = logits[i];
    return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v;
  };
  LogitSummary out;
  float mx = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < vocab; ++i) mx = std::max(mx, clean(i));
  double s = 0, t = 0;
  for (int i = 0; i < vocab; ++i) {
    const double d = double(clean(i)) - mx;
    const double ev = std::exp(d);
    s += ev;
    if (ev > 0) t += ev * d;
  }
  const double lse = mx + std::log(s);
  out.max_logit = mx;
  out.log_sum_exp = static_cast<float>(lse);
  out.entropy = static_cast<float>(std::log(s) - t / s);

  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    const float va = clean(a), vb = clean(b);
    return va > vb || (va == vb && a < b);
  });
  for (int i = 0; i < k; ++i) {
    const int id = order[i];
    out.ids.push_back(id);
    out.logits.push_back(clean(id));
    out.probs.push_back(static_cast<float>(std::exp(double(clean(id)) - lse)));
  }
  return out;
}

}  // namespace ts::cpu
