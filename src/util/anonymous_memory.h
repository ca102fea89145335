#pragma once
// Owned floats in one anonymous mapping (zero-filled; pages become resident
// as they are written): a model's weights and the CPU backend's K/V pools.
//
// Pages::kHuge (the weights) aligns the floats to 2 MB and advises
// transparent huge pages (MADV_HUGEPAGE; the kernel uses them where it can,
// else 4 KB pages). Every forward pass streams all the weights, and with
// 2 MB pages the stream needs 512x fewer TLB entries: a GPT-2 124M decode
// step took 0.83-0.92x the time it took reading the same weights in place
// from the file's memory map (2-vCPU VM, alternating runs). Pages::kSmall
// (the K/V pools) keeps 4 KB pages, so resident memory grows with the
// context actually written rather than in 2 MB steps.
#include <cstddef>
#include <string_view>

namespace ts {

class AnonymousMemory {
 public:
  enum class Pages { kSmall, kHuge };
  // Throws ts::Error (one line, starting with `what`) when the system
  // refuses the memory.
  AnonymousMemory(size_t floats, std::string_view what, Pages pages);
  ~AnonymousMemory();
  AnonymousMemory(AnonymousMemory&& o) noexcept;
  AnonymousMemory(const AnonymousMemory&) = delete;
  AnonymousMemory& operator=(const AnonymousMemory&) = delete;
  AnonymousMemory& operator=(AnonymousMemory&&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t bytes() const { return floats_ * sizeof(float); }

 private:
  void* map_ = nullptr;  // what munmap takes: the span plus any alignment slack
  size_t map_bytes_ = 0;
  float* data_ = nullptr;
  size_t floats_ = 0;
};

}  // namespace ts
