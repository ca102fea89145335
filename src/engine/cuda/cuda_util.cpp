#include "engine/cuda/cuda_util.h"

#include <cstdio>

namespace ts::cuda_detail {

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

void throw_cuda(cudaError_t e, const char* what) {
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so the backend stays usable
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw Error(std::string("CUDA out of memory in ") + what + " (" + mib(free_b) + " free of " +
                mib(total_b) + ")");
  }
  throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorName(e) + " (" +
              cudaGetErrorString(e) + ")");
}

void throw_cublas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_ALLOC_FAILED)
    throw Error(std::string("CUDA out of memory in ") + what + " (cuBLAS could not allocate)");
  throw Error(std::string("cuBLAS error in ") + what + ": " + cublasGetStatusName(s) + " (" +
              cublasGetStatusString(s) + ")");
}

void* device_alloc(size_t bytes, const char* what) {
  if (bytes == 0) bytes = 1;
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaSuccess) return p;
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw Error(std::string("CUDA out of memory: ") + what + " needs " + mib(bytes) +
                ", the GPU has " + mib(free_b) + " free of " + mib(total_b));
  }
  throw_cuda(e, what);
}

}  // namespace ts::cuda_detail
