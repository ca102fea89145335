// The roofline's roofs on a CUDA device, measured rather than read from the
// data sheet: a large SGEMM for FLOP/s and a device-to-device copy for
// memory bandwidth, each the best of a few timed repeats.
#include <string>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_util.h"

namespace ts {

using cuda_detail::check;

std::string measure_cuda_roofs(double* peak_flops, double* bandwidth) {
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
  // Plain fp32, as the backend's matmuls run by default (no TF32).
  check(cublasSetMathMode(handle.get(), CUBLAS_DEFAULT_MATH), "roof probe: math mode");
  const float one = 1.0f, zero = 0.0f;
  const double gemm_s = 1e-3 * cuda_detail::best_milliseconds(1, 5, nullptr, [&] {
                          check(cublasSgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one,
                                            x.get(), n, y.get(), n, &zero, z.get(), n),
                                "roof probe: sgemm");
                        });
  *peak_flops = 2.0 * n * static_cast<double>(n) * n / gemm_s;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  return "measured at start-up on " + std::string(prop.name) + ": fp32 SGEMM " + std::to_string(n) +
         "x" + std::to_string(n) + ", device-to-device copy of 512 MiB";
}

}  // namespace ts
