// The SwiGLU gate of the Llama family's MLP: out = silu(gate) * up, with
// gate | up side by side in each input row. CPU twin: cpu::swiglu
// (src/engine/cpu/swiglu.cpp).
#include "common.cuh"
#include "kernels.cuh"

namespace ts::kernels {
namespace {

__global__ void swiglu_kernel(const float* __restrict__ gate_up, int rows, int n,
                              float* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {  // rows may exceed grid y's limit
    const float* g = gate_up + static_cast<long long>(r) * 2 * n;
    const float gi = g[i];
    out[static_cast<long long>(r) * n + i] = gi / (1.0f + expf(-gi)) * g[n + i];
  }
}

}  // namespace

// ---- launch ----
cudaError_t swiglu(const float* gate_up, int rows, int n, float* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  swiglu_kernel<<<dim3(ceil_div(n, 256), grid_rows(rows)), 256, 0, stream>>>(gate_up, rows, n, out);
  return cudaGetLastError();
}

}  // namespace ts::kernels
