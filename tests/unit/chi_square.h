#pragma once
// Pearson's chi-square test for the tests that check a sampling rule keeps a
// distribution.
#include <cmath>
#include <map>
#include <vector>

namespace ts::test {

// P(chi-square with df degrees of freedom >= x), Wilson-Hilferty's normal
// approximation (good to a few per cent of the p-value for df >= 3, plenty
// for telling 1e-3 from 1e-9).
inline double chi2_p_value(double x, int df) {
  if (std::isinf(x)) return 0.0;
  const double k = df;
  const double z = (std::cbrt(x / k) - (1 - 2 / (9 * k))) / std::sqrt(2 / (9 * k));
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

using Outcome = std::vector<int>;

// Pearson's test of observed outcomes against exact probabilities; cells
// expected fewer than 5 times are pooled. An outcome the exact distribution
// gives probability 0 makes the statistic infinite.
inline double chi2_test(const std::map<Outcome, int>& counts,
                        const std::map<Outcome, double>& exact, int n) {
  double stat = 0, pooled_expected = 0;
  int pooled_count = 0, cells = 0;
  for (const auto& [o, c] : counts)
    if (!exact.count(o)) return 0.0;
  for (const auto& [o, prob] : exact) {
    const double e = prob * n;
    const auto it = counts.find(o);
    const int c = it == counts.end() ? 0 : it->second;
    if (e < 5) {
      pooled_expected += e;
      pooled_count += c;
      continue;
    }
    stat += (c - e) * (c - e) / e;
    ++cells;
  }
  if (pooled_expected > 0) {
    stat += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) / pooled_expected;
    ++cells;
  }
  return chi2_p_value(stat, cells - 1);
}

}  // namespace ts::test
