#pragma once
// Error checks and device buffers of the CUDA backend (CUDA types: private to
// src/engine/cuda/). Every failure becomes a one-line ts::Error.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "util/error.h"

namespace ts::cuda_detail {

[[noreturn]] void throw_cuda(cudaError_t e, const char* what);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* what);

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw_cuda(e, what);
}
inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw_cublas(s, what);
}

std::string mib(size_t bytes);

// cudaMalloc with a message that names what was being allocated and how much
// memory the device has left when it does not fit.
void* device_alloc(size_t bytes, const char* what);

// A device array that only grows; generation() changes whenever the pointer
// does (CUDA graphs captured with the old pointer must be dropped).
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { release(); }

  // Returns true when the buffer was reallocated (contents are lost).
  bool reserve(size_t count, const char* what) {
    if (count <= capacity_) return false;
    release();
    ptr_ = static_cast<T*>(device_alloc(count * sizeof(T), what));
    capacity_ = count;
    return true;
  }
  void release() {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
  }
  T* get() const { return ptr_; }
  size_t capacity() const { return capacity_; }

 private:
  T* ptr_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace ts::cuda_detail
