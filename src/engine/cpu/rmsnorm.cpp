#include "engine/cpu/rmsnorm.h"

#include <cmath>

namespace ts::cpu {
namespace {

void normalize_row(const float* x, const float* weight, int c, float eps, float* out) {
  float sum = 0.0f;
  for (int i = 0; i < c; ++i) sum += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(sum / static_cast<float>(c) + eps);
  for (int i = 0; i < c; ++i) out[i] = x[i] * inv * weight[i];
}

}  // namespace

void rmsnorm(const float* x, const float* weight, int rows, int c, float eps, float* out) {
  for (long long r = 0; r < rows; ++r) normalize_row(x + r * c, weight, c, eps, out + r * c);
}

void residual_rmsnorm(float* x, const float* y, const float* weight, int rows, int c, float eps,
                      float* out) {
  for (long long r = 0; r < rows; ++r) {
    float* xr = x + r * c;
    const float* yr = y + r * c;
    for (int i = 0; i < c; ++i) xr[i] += yr[i];
    normalize_row(xr, weight, c, eps, out + r * c);
  }
}

}  // namespace ts::cpu
