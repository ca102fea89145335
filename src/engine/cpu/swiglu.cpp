#include "engine/cpu/swiglu.h"

#include <cmath>

namespace ts::cpu {

void swiglu(const float* gate_up, int rows, int n, float* out) {
  for (long long r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * n;
    const float* u = g + n;
    float* o = out + r * n;
    for (int i = 0; i < n; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

}  // namespace ts::cpu
