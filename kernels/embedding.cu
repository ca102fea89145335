// Token + position embedding: out[r] = wte[tokens[r]] + wpe[positions[r]]
// (wpe null: no learned positions, the Llama family).
// CPU twin: cpu::embed (src/engine/cpu/embedding.cpp).
#include "common.cuh"
#include "kernels.cuh"

namespace ts::kernels {
namespace {

__global__ void embed_kernel(const float* __restrict__ wte, const float* __restrict__ wpe,
                             const int* __restrict__ tokens, const int* __restrict__ positions,
                             int rows, int c, float* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= c) return;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {  // rows may exceed grid y's limit
    const long long t = tokens[r], p = positions[r];
    out[static_cast<long long>(r) * c + i] = wte[t * c + i] + (wpe ? wpe[p * c + i] : 0.0f);
  }
}

}  // namespace

// ---- launch ----
cudaError_t embed(const float* wte, const float* wpe, const int* tokens, const int* positions,
                  int rows, int c, float* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  embed_kernel<<<dim3(ceil_div(c, 256), grid_rows(rows)), 256, 0, stream>>>(
      wte, wpe, tokens, positions, rows, c, out);
  return cudaGetLastError();
}

}  // namespace ts::kernels
