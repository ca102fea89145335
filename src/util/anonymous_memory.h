#pragma once
// Owned memory for a model's fp32 weights: one anonymous mapping, 2 MB
// aligned and advised for transparent huge pages (MADV_HUGEPAGE; the kernel
// uses them where it can, else 4 KB pages). Every forward pass streams all
// the weights, and with 2 MB pages the stream needs 512x fewer TLB entries:
// a GPT-2 124M decode step took 0.83-0.92x the time it took reading the same
// weights in place from the file's memory map (2-vCPU VM, alternating runs).
#include <cstddef>

namespace ts {

class WeightBuffer {
 public:
  // Zero-filled, not yet resident (pages appear as they are written). Throws
  // ts::Error (one line) when the system refuses the memory.
  explicit WeightBuffer(size_t floats);
  ~WeightBuffer();
  WeightBuffer(const WeightBuffer&) = delete;
  WeightBuffer& operator=(const WeightBuffer&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t floats() const { return floats_; }

 private:
  void* map_ = nullptr;  // what munmap takes: the aligned span plus its slack
  size_t map_bytes_ = 0;
  float* data_ = nullptr;
  size_t floats_ = 0;
};

}  // namespace ts
