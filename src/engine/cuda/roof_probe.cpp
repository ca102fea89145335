// The roofline's roofs on a CUDA device, measured rather than read from the
// data sheet: a large SGEMM for FLOP/s and a device-to-device copy for
// memory bandwidth, each the best of a few timed repeats. The GEMM runs in the
// math the backend's matmuls use (fp32, or TF32 when that is on).
#include <string>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_util.h"

namespace ts {

using cuda_detail::check;

std::string measure_cuda_roofs(double* peak_flops, double* bandwidth, bool tf32) {
  const size_t copy_bytes = 512ull << 20;
  cuda_detail::DeviceArray<char> a, b;
  a.reserve(copy_bytes, "roof probe copy source");
  b.reserve(copy_bytes, "roof probe copy target");
  const double copy_s =
      1e-3 * cuda_detail::best_milliseconds(1, 5, nullptr, [&] {
        check(cudaMemcpyAsync(b.get(), a.get(), copy_bytes, cudaMemcpyDeviceToDevice, nullptr),
              "roof probe: copy");
      });
  *bandwidth = 2.0 * static_cast<double>(copy_bytes) / copy_s;  // each byte read once, written once

  const int n = 4096;
  cuda_detail::DeviceArray<float> x, y, z;
  x.reserve(static_cast<size_t>(n) * n, "roof probe matrix");
  y.reserve(static_cast<size_t>(n) * n, "roof probe matrix");
  z.reserve(static_cast<size_t>(n) * n, "roof probe matrix");
  check(cudaMemset(x.get(), 0, sizeof(float) * n * n), "roof probe: memset");
  check(cudaMemset(y.get(), 0, sizeof(float) * n * n), "roof probe: memset");
  const cuda_detail::CublasHandle handle;
  // The math of the backend's matmuls: plain fp32 by default, TF32 tensor
  // cores (fp32 in and out) with TOKENSCOPE_CUDA_TF32=1.
  check(cublasSetMathMode(handle.get(), tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        "roof probe: math mode");
  const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float one = 1.0f, zero = 0.0f;
  const double gemm_s = 1e-3 * cuda_detail::best_milliseconds(1, 5, nullptr, [&] {
                          check(cublasGemmEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one,
                                             x.get(), CUDA_R_32F, n, y.get(), CUDA_R_32F, n, &zero,
                                             z.get(), CUDA_R_32F, n, compute, CUBLAS_GEMM_DEFAULT),
                                "roof probe: gemm");
                        });
  *peak_flops = 2.0 * n * static_cast<double>(n) * n / gemm_s;
  cudaDeviceProp prop{};
  int device = 0;
  cudaGetDevice(&device);
  cudaGetDeviceProperties(&prop, device);
  return "measured at start-up on " + std::string(prop.name) + ": " +
         (tf32 ? "TF32 tensor-core GEMM " : "fp32 SGEMM ") + std::to_string(n) + "x" +
         std::to_string(n) + ", device-to-device copy of 512 MiB";
}

}  // namespace ts
