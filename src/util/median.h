#pragma once
// The one median every timing in TokenScope reports (the benchmark, the
// window's frame times, the batch sweep, the precision comparison): the
// middle value of the sorted samples, the mean of the middle two for an even
// count; 0 for none.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace ts {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m), v.end());
  if (v.size() % 2) return v[m];
  const double upper = v[m];
  return 0.5 * (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m)) + upper);
}

}  // namespace ts
