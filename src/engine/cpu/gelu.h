#pragma once
// GPT-2's gelu_new (the tanh approximation), in place. CPU twin of
// kernels/gelu.cu (kernels::bias_gelu, which also adds the bias the CPU
// matmul has already added).
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
namespace ts::cpu {

void gelu(float* x, long long n);

}  // namespace ts::cpu
