// Rotary position embedding of the queries and keys, in place, in Hugging
// Face's rotate-half layout; CPU twin cpu::rope (src/engine/cpu/rope.cpp),
// whose angles it computes the same way (in double, sine and cosine rounded
// to fp32). The q/k/v bias (Qwen2), when there is one, is added first: the
// CPU matmul adds it before its rope.
#include "common.cuh"
#include "kernels.cuh"

namespace ts::kernels {
namespace {

constexpr int kThreads = 128;

// One thread block per row; thread j owns pair j (head j / half, dimension
// j % half and j % half + half) of the q and k heads, then the v columns.
__global__ void rope_kernel(float* __restrict__ qkv, int ld, const float* __restrict__ bias,
                            const int* __restrict__ positions, int rotated_heads, int head_dim,
                            float theta) {
  const long long r = blockIdx.x;
  float* row = qkv + r * ld;
  const int half = head_dim / 2, pairs = rotated_heads * half, rotated = rotated_heads * head_dim;
  const int pos = positions[r];
  for (int j = threadIdx.x; j < pairs; j += blockDim.x) {
    const int h = j / half, i = j % half;
    const int c0 = h * head_dim + i, c1 = c0 + half;
    const double inv_freq = pow(static_cast<double>(theta), -2.0 * i / head_dim);
    double s = 0.0, co = 0.0;
    sincos(pos * inv_freq, &s, &co);
    const float sin_a = static_cast<float>(s), cos_a = static_cast<float>(co);
    const float x0 = row[c0] + (bias ? bias[c0] : 0.0f);
    const float x1 = row[c1] + (bias ? bias[c1] : 0.0f);
    row[c0] = x0 * cos_a - x1 * sin_a;
    row[c1] = x1 * cos_a + x0 * sin_a;
  }
  if (bias)
    for (int i = rotated + threadIdx.x; i < ld; i += blockDim.x) row[i] += bias[i];
}

}  // namespace

// ---- launch ----
cudaError_t rope(float* qkv, int ld, const float* bias, const int* positions, int rows, int n_head,
                 int n_kv_head, int head_dim, float theta, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  rope_kernel<<<rows, kThreads, 0, stream>>>(qkv, ld, bias, positions, n_head + n_kv_head, head_dim,
                                             theta);
  return cudaGetLastError();
}

}  // namespace ts::kernels
