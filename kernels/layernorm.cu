// Layer norm, and the residual add fused with the layer norm that follows it.
// One thread block per row; two passes (mean, then the variance of the
// differences) like the CPU twin cpu::layernorm (src/engine/cpu/layernorm.cpp).
#include "common.cuh"
#include "kernels.cuh"

namespace ts::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ void normalize_row(const float* __restrict__ xr,
                                              const float* __restrict__ weight,
                                              const float* __restrict__ bias, int c, float eps,
                                              float sum, float* scratch, float* __restrict__ o) {
  const float mean = block_sum(sum, scratch) / static_cast<float>(c);
  float var = 0.0f;
  for (int i = threadIdx.x; i < c; i += blockDim.x) {
    const float d = xr[i] - mean;
    var += d * d;
  }
  var = block_sum(var, scratch) / static_cast<float>(c);
  const float inv = 1.0f / sqrtf(var + eps);
  for (int i = threadIdx.x; i < c; i += blockDim.x)
    o[i] = (xr[i] - mean) * inv * weight[i] + bias[i];
}

__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                                 const float* __restrict__ bias, int c, float eps,
                                 float* __restrict__ out) {
  __shared__ float scratch[32];
  const long long r = blockIdx.x;
  const float* xr = x + r * c;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < c; i += blockDim.x) sum += xr[i];
  normalize_row(xr, weight, bias, c, eps, sum, scratch, out + r * c);
}

// x += y + y_bias, then out = layernorm(x). Each thread reads back only the
// elements it wrote itself, so no barrier is needed between the two.
__global__ void residual_layernorm_kernel(float* __restrict__ x, const float* __restrict__ y,
                                          const float* __restrict__ y_bias,
                                          const float* __restrict__ weight,
                                          const float* __restrict__ bias, int c, float eps,
                                          float* __restrict__ out) {
  __shared__ float scratch[32];
  const long long r = blockIdx.x;
  float* xr = x + r * c;
  const float* yr = y + r * c;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < c; i += blockDim.x) {
    const float v = xr[i] + (yr[i] + (y_bias ? y_bias[i] : 0.0f));
    xr[i] = v;
    sum += v;
  }
  normalize_row(xr, weight, bias, c, eps, sum, scratch, out + r * c);
}

}  // namespace

// ---- launch ----
cudaError_t layernorm(const float* x, const float* weight, const float* bias, int rows, int c,
                      float eps, float* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  layernorm_kernel<<<rows, kThreads, 0, stream>>>(x, weight, bias, c, eps, out);
  return cudaGetLastError();
}

cudaError_t residual_layernorm(float* x, const float* y, const float* y_bias, const float* weight,
                               const float* bias, int rows, int c, float eps, float* out,
                               cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  residual_layernorm_kernel<<<rows, kThreads, 0, stream>>>(x, y, y_bias, weight, bias, c, eps, out);
  return cudaGetLastError();
}

}  // namespace ts::kernels
