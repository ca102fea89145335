// RMS norm (the Llama family's norm), alone and fused with the residual add
// before it. One thread block per row; the sum of squares, then the scaled
// row, like the CPU twin cpu::rmsnorm (src/engine/cpu/rmsnorm.cpp).
#include "common.cuh"
#include "kernels.cuh"

namespace ts::kernels {
namespace {

constexpr int kThreads = 256;

// One row: x += y first when y is set (each thread reads back only the
// elements it wrote itself, so no barrier is needed), then out = rmsnorm(x).
__global__ void rmsnorm_kernel(float* __restrict__ x, const float* __restrict__ y,
                               const float* __restrict__ weight, int c, float eps,
                               float* __restrict__ out) {
  __shared__ float scratch[32];
  const long long r = blockIdx.x;
  float* xr = x + r * c;
  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < c; i += blockDim.x) {
    float v = xr[i];
    if (y) {
      v += y[r * c + i];
      xr[i] = v;
    }
    sum_sq += v * v;
  }
  const float inv = 1.0f / sqrtf(block_sum(sum_sq, scratch) / static_cast<float>(c) + eps);
  float* o = out + r * c;
  for (int i = threadIdx.x; i < c; i += blockDim.x) o[i] = xr[i] * inv * weight[i];
}

}  // namespace

// ---- launch ----
cudaError_t rmsnorm(const float* x, const float* weight, int rows, int c, float eps, float* out,
                    cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  // x is only read when no y is given.
  rmsnorm_kernel<<<rows, kThreads, 0, stream>>>(const_cast<float*>(x), nullptr, weight, c, eps,
                                                out);
  return cudaGetLastError();
}

cudaError_t residual_rmsnorm(float* x, const float* y, const float* weight, int rows, int c,
                             float eps, float* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  rmsnorm_kernel<<<rows, kThreads, 0, stream>>>(x, y, weight, c, eps, out);
  return cudaGetLastError();
}

}  // namespace ts::kernels
