#pragma once
// Element-wise and row-wise operations of the GPT-2 forward pass on the CPU.
// These are the reference twins of the CUDA kernels in kernels/.

namespace ts::cpu {

// out[r] = wte[token[r]] + wpe[pos[r]] for each row.
void embed(const float* wte, const float* wpe, const int* tokens, const int* positions, int rows,
           int c, float* out);

// out = (x - mean) / sqrt(var + eps) * weight + bias, row by row (biased variance).
void layernorm(const float* x, const float* weight, const float* bias, int rows, int c, float eps,
               float* out);

// GPT-2's gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in place.
void gelu_new(float* x, long long n);

// x += y
void add_inplace(float* x, const float* y, long long n);

// Numerically safe softmax of n values in place (max subtracted).
void softmax_inplace(float* x, int n);

float dot(const float* a, const float* b, int n);

}  // namespace ts::cpu
