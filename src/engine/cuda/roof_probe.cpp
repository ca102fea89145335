// The roofline's roofs on a CUDA device, measured rather than read from the
// data sheet: a large SGEMM for FLOP/s and a device-to-device copy for
// memory bandwidth, each the best of a few timed repeats.
#include <algorithm>
#include <cstdio>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_util.h"

namespace ts {

using cuda_detail::check;

namespace {

// Times `fn` with CUDA events: best of `repeats` after one warm-up.
template <typename Fn>
double best_seconds(int repeats, Fn fn) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "roof probe: event");
  check(cudaEventCreate(&stop), "roof probe: event");
  fn();
  float best_ms = 1e30f;
  for (int r = 0; r < repeats; ++r) {
    check(cudaEventRecord(start), "roof probe: record");
    fn();
    check(cudaEventRecord(stop), "roof probe: record");
    check(cudaEventSynchronize(stop), "roof probe: synchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "roof probe: elapsed");
    best_ms = std::min(best_ms, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best_ms * 1e-3;
}

}  // namespace

std::string measure_cuda_roofs(double* peak_flops, double* bandwidth) {
  const size_t copy_bytes = 512ull << 20;
  cuda_detail::DeviceArray<char> a, b;
  a.reserve(copy_bytes, "roof probe copy source");
  b.reserve(copy_bytes, "roof probe copy target");
  const double copy_s = best_seconds(5, [&] {
    check(cudaMemcpy(b.get(), a.get(), copy_bytes, cudaMemcpyDeviceToDevice), "roof probe: copy");
  });
  *bandwidth = 2.0 * static_cast<double>(copy_bytes) / copy_s;  // each byte read once, written once

  const int n = 4096;
  cuda_detail::DeviceArray<float> x, y, z;
  x.reserve(static_cast<size_t>(n) * n, "roof probe matrix");
  y.reserve(static_cast<size_t>(n) * n, "roof probe matrix");
  z.reserve(static_cast<size_t>(n) * n, "roof probe matrix");
  check(cudaMemset(x.get(), 0, sizeof(float) * n * n), "roof probe: memset");
  check(cudaMemset(y.get(), 0, sizeof(float) * n * n), "roof probe: memset");
  cublasHandle_t handle;
  check(cublasCreate(&handle), "roof probe: cublasCreate");
  // Plain fp32, as the backend's matmuls run by default (no TF32).
  check(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "roof probe: math mode");
  const float one = 1.0f, zero = 0.0f;
  double gemm_s = 0;
  try {
    gemm_s = best_seconds(5, [&] {
      check(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, x.get(), n, y.get(), n,
                        &zero, z.get(), n),
            "roof probe: sgemm");
    });
  } catch (...) {
    cublasDestroy(handle);
    throw;
  }
  cublasDestroy(handle);
  *peak_flops = 2.0 * n * static_cast<double>(n) * n / gemm_s;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  char how[256];
  std::snprintf(how, sizeof(how),
                "measured at start-up on %s: fp32 SGEMM %dx%d, device-to-device copy of 512 MiB",
                prop.name, n, n);
  return how;
}

}  // namespace ts
