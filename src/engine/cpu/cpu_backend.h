#pragma once
// The reference backend: plain fp32 on the host, multithreaded, AVX2.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/backend.h"
#include "model/weights.h"

namespace ts {

// threads = 0: one per hardware thread.
std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const ModelWeights> weights,
                                          int threads = 0);

// Host memory a CPU backend holds beside the weights, for the memory report.
struct CpuBackendMemory {
  struct Range {
    const void* begin = nullptr;
    size_t bytes = 0;
  };
  // Each layer's K and V pool: anonymous maps reserved for the whole cache
  // (init_cache); a page becomes resident only when a slot in it is written.
  std::vector<Range> kv_pools;
  // Activations and logits rows of a forward: allocated for the step and
  // freed after it. The last forward's and the largest so far.
  int64_t scratch_last_bytes = 0;
  int64_t scratch_peak_bytes = 0;
};

// The figures of a backend made by make_cpu_backend; nullopt for any other.
std::optional<CpuBackendMemory> cpu_backend_memory(const Backend& backend);

}  // namespace ts
