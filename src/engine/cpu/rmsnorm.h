#pragma once
// RMS norm (the Llama family's norm), alone and fused with the residual add
// before it. Named after the CUDA kernels a GPU port would add
// (kernels::rmsnorm, kernels::residual_rmsnorm).
//   rmsnorm(x) = x / sqrt(mean(x^2) + eps) * weight
// row by row over the C values of a row; no mean subtracted, no bias.
namespace ts::cpu {

// out = rmsnorm(x)
void rmsnorm(const float* x, const float* weight, int rows, int c, float eps, float* out);

// x += y; out = rmsnorm(x): a sub-layer's residual add and the norm that reads it.
void residual_rmsnorm(float* x, const float* y, const float* weight, int rows, int c, float eps,
                      float* out);

}  // namespace ts::cpu
