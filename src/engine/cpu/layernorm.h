#pragma once
// Layer norm, alone and fused with the residual add before it. CPU twins of
// kernels/layernorm.cu (kernels::layernorm, kernels::residual_layernorm).
//   layernorm(x) = (x - mean) / sqrt(var + eps) * weight + bias
// row by row over the C values of a row, with the biased variance (divided by C).
namespace ts::cpu {

// out = layernorm(x)
void layernorm(const float* x, const float* weight, const float* bias, int rows, int c, float eps,
               float* out);

// x += y; out = layernorm(x). The residual add of a block's sub-layer and the
// layer norm that reads its result, in one pass (the GPU saves a kernel and a
// read of x; the CPU does the same arithmetic in the same order).
void residual_layernorm(float* x, const float* y, const float* weight, const float* bias, int rows,
                        int c, float eps, float* out);

}  // namespace ts::cpu
