#pragma once
// GPT-2's gelu_new (the tanh approximation), in place. CPU twin of
// kernels/gelu.cu (kernels::bias_gelu, which also adds the bias the CPU
// matmul has already added).
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// computed as x / (1 + e^(-2u)) with u = sqrt(2/pi) (x + 0.044715 x^3), the
// same function (0.5 (1 + tanh u) = 1 / (1 + e^(-2u))) without the
// cancellation of 1 + tanh u near -1, and with a vectorised e^x: a libm tanh
// per value was a visible share of a decode step (docs/performance.md).
namespace ts::cpu {

void gelu(float* x, long long n);

}  // namespace ts::cpu
