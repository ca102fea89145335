#include "engine/cpu/ops.h"

#include <algorithm>
#include <cmath>

namespace ts::cpu {

void embed(const float* wte, const float* wpe, const int* tokens, const int* positions, int rows,
           int c, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* t = wte + static_cast<long long>(tokens[r]) * c;
    const float* p = wpe + static_cast<long long>(positions[r]) * c;
    float* o = out + static_cast<long long>(r) * c;
    for (int i = 0; i < c; ++i) o[i] = t[i] + p[i];
  }
}

void layernorm(const float* x, const float* weight, const float* bias, int rows, int c, float eps,
               float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<long long>(r) * c;
    float* o = out + static_cast<long long>(r) * c;
    float mean = 0.0f;
    for (int i = 0; i < c; ++i) mean += xr[i];
    mean /= static_cast<float>(c);
    float var = 0.0f;
    for (int i = 0; i < c; ++i) {
      const float d = xr[i] - mean;
      var += d * d;
    }
    var /= static_cast<float>(c);
    const float inv = 1.0f / std::sqrt(var + eps);
    for (int i = 0; i < c; ++i) o[i] = (xr[i] - mean) * inv * weight[i] + bias[i];
  }
}

void gelu_new(float* x, long long n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (long long i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
}

void add_inplace(float* x, const float* y, long long n) {
  for (long long i = 0; i < n; ++i) x[i] += y[i];
}

void softmax_inplace(float* x, int n) {
  float mx = x[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace ts::cpu
