#include "engine/cpu/gelu.h"

#include <cmath>

namespace ts::cpu {

void gelu(float* x, long long n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (long long i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
}

}  // namespace ts::cpu
