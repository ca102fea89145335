#include "engine/cpu/layernorm.h"

#include <cmath>

namespace ts::cpu {
namespace {

// Two passes like the CUDA kernel: the mean, then the variance of the differences.
void normalize_row(const float* x, const float* weight, const float* bias, int c, float eps,
                   float* out) {
  float mean = 0.0f;
  for (int i = 0; i < c; ++i) mean += x[i];
  mean /= static_cast<float>(c);
  float var = 0.0f;
  for (int i = 0; i < c; ++i) {
    const float d = x[i] - mean;
    var += d * d;
  }
  var /= static_cast<float>(c);
  const float inv = 1.0f / std::sqrt(var + eps);
  for (int i = 0; i < c; ++i) out[i] = (x[i] - mean) * inv * weight[i] + bias[i];
}

}  // namespace

void layernorm(const float* x, const float* weight, const float* bias, int rows, int c, float eps,
               float* out) {
  for (long long r = 0; r < rows; ++r) normalize_row(x + r * c, weight, bias, c, eps, out + r * c);
}

void residual_layernorm(float* x, const float* y, const float* weight, const float* bias, int rows,
                        int c, float eps, float* out) {
  for (long long r = 0; r < rows; ++r) {
    float* xr = x + r * c;
    const float* yr = y + r * c;
    for (int i = 0; i < c; ++i) xr[i] += yr[i];
    normalize_row(xr, weight, bias, c, eps, out + r * c);
  }
}

}  // namespace ts::cpu
