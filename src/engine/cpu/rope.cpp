#include "engine/cpu/rope.h"

#include <cmath>
#include <vector>

namespace ts::cpu {

void rope(float* qkv, int ld, const int* positions, int rows, int n_head, int n_kv_head,
          int head_dim, float theta) {
  const int half = head_dim / 2;
  std::vector<float> cos_a(half), sin_a(half);
  for (long long r = 0; r < rows; ++r) {
    for (int i = 0; i < half; ++i) {
      const double inv_freq = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
      const double a = positions[r] * inv_freq;
      cos_a[i] = static_cast<float>(std::cos(a));
      sin_a[i] = static_cast<float>(std::sin(a));
    }
    float* row = qkv + r * ld;
    for (int h = 0; h < n_head + n_kv_head; ++h) {
      float* v = row + static_cast<long long>(h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * cos_a[i] - x1 * sin_a[i];
        v[i + half] = x1 * cos_a[i] + x0 * sin_a[i];
      }
    }
  }
}

}  // namespace ts::cpu
