#pragma once
// Error checks and device buffers of the CUDA backend (CUDA types: private to
// src/engine/cuda/). Every failure becomes a one-line ts::Error.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

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

// A CUDA event owned by a scope: destroyed however the scope is left (a
// timing whose check throws leaks nothing).
class Event {
 public:
  Event() { check(cudaEventCreate(&event_), "cudaEventCreate"); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (event_) cudaEventDestroy(event_);
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// A cuBLAS handle owned by a scope.
class CublasHandle {
 public:
  CublasHandle() { check(cublasCreate(&handle_), "cublasCreate"); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle() {
    if (handle_) cublasDestroy(handle_);
  }
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Milliseconds `fn` takes on `stream`, timed with CUDA events: the best of
// `repeats` runs after `warmups` untimed ones.
template <typename Fn>
float best_milliseconds(int warmups, int repeats, cudaStream_t stream, Fn fn) {
  Event start, stop;
  for (int i = 0; i < warmups; ++i) fn();
  float best_ms = 1e30f;
  for (int r = 0; r < repeats; ++r) {
    check(cudaEventRecord(start.get(), stream), "cudaEventRecord");
    fn();
    check(cudaEventRecord(stop.get(), stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop.get()), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime");
    best_ms = ms < best_ms ? ms : best_ms;
  }
  return best_ms;
}

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
  void swap(DeviceArray& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(capacity_, other.capacity_);
  }

 private:
  T* ptr_ = nullptr;
  size_t capacity_ = 0;
};

// A region of a larger device allocation, used where a DeviceArray is (get()).
template <typename T>
struct DeviceView {
  T* ptr = nullptr;
  T* get() const { return ptr; }
};

// Page-locked host memory that only grows (contents are lost when it does):
// device-to-host copies into it are true asynchronous DMA, not staged by the
// driver through its own buffer one chunk at a time.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { release(); }
  // Grows to at least `bytes`, by at least half again, so that slowly
  // growing requests do not reallocate every time.
  void reserve(size_t bytes, const char* what) {
    if (bytes <= capacity_) return;
    const size_t n = bytes > capacity_ + capacity_ / 2 ? bytes : capacity_ + capacity_ / 2;
    release();
    check(cudaMallocHost(&ptr_, n), what);
    capacity_ = n;
  }
  void release() {
    if (ptr_) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
  }
  unsigned char* get() const { return static_cast<unsigned char*>(ptr_); }
  size_t capacity() const { return capacity_; }

 private:
  void* ptr_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace ts::cuda_detail
