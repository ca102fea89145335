// Bias add fused with GPT-2's gelu_new (the tanh approximation).
// CPU twin: cpu::gelu (src/engine/cpu/gelu.cpp), after the bias the CPU
// matmul adds.
#include "common.cuh"
#include "kernels.cuh"

namespace ts::kernels {
namespace {

__global__ void bias_gelu_kernel(float* __restrict__ x, const float* __restrict__ bias, int n,
                                 long long total) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const float v = x[i] + bias[i % n];
  // 0.5 v (1 + tanh u) written as v / (1 + e^(-2u)), as the CPU twin does.
  const float u = kSqrt2OverPi * (v + 0.044715f * v * v * v);
  x[i] = v / (1.0f + expf(-2.0f * u));
}

}  // namespace

// ---- launch ----
cudaError_t bias_gelu(float* x, const float* bias, int rows, int n, cudaStream_t stream) {
  const long long total = static_cast<long long>(rows) * n;
  if (total <= 0) return cudaSuccess;
  bias_gelu_kernel<<<ceil_div(total, 256), 256, 0, stream>>>(x, bias, n, total);
  return cudaGetLastError();
}

}  // namespace ts::kernels
