// Row gather (the rows that need logits; the last row of each entry for the
// residual stream), and the probe that tells whether this build's device code
// runs on the current GPU. CPU twin of the gather: memcpy.
#include "common.cuh"
#include "kernels.cuh"

namespace ts::kernels {
namespace {

__global__ void gather_rows_kernel(const float* __restrict__ src, const int* __restrict__ index,
                                   int n, int c, float* __restrict__ dst, int dst_stride) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= c) return;
  for (int r = blockIdx.y; r < n; r += gridDim.y)  // n may exceed grid y's limit
    dst[static_cast<long long>(r) * dst_stride + i] = src[static_cast<long long>(index[r]) * c + i];
}

}  // namespace

// ---- launch ----
cudaError_t gather_rows(const float* src, const int* index, int n, int c, float* dst,
                        int dst_stride, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  gather_rows_kernel<<<dim3(ceil_div(c, 256), grid_rows(n)), 256, 0, stream>>>(src, index, n, c,
                                                                               dst, dst_stride);
  return cudaGetLastError();
}

bool kernels_loadable(std::string* why) {
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, gather_rows_kernel);
  if (e == cudaSuccess) return true;
  cudaGetLastError();  // clear it: the probe's failure is not the caller's
  if (why) {
    int dev = 0, major = 0, minor = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
#ifdef TS_CUDA_ARCHS
    const std::string built = TS_CUDA_ARCHS;
#else
    const std::string built = "?";
#endif
    *why = std::string("the CUDA kernels do not load on this GPU (") + cudaGetErrorString(e) +
           "): built for CMAKE_CUDA_ARCHITECTURES=" + built + ", the device is sm_" +
           std::to_string(major) + std::to_string(minor) +
           "; rebuild with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(major) +
           std::to_string(minor);
  }
  return false;
}

}  // namespace ts::kernels
