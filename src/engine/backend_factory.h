#pragma once
// Picks the backend at run time: "auto" takes CUDA when a device answers and
// the CPU otherwise; "cpu" and "cuda" force one. When CUDA was asked for (or
// auto found none) the notice says why in one line.
#include <memory>
#include <string>

#include "engine/backend.h"
#include "model/weights.h"

namespace ts {

struct BackendSelection {
  std::unique_ptr<Backend> backend;
  std::string notice;  // empty when the wish was met silently
};

// device: "auto", "cpu" or "cuda". Throws ts::Error for any other name, and
// for "cuda" when no CUDA device can be used.
BackendSelection make_backend(const std::string& device,
                              std::shared_ptr<const ModelWeights> weights, int cpu_threads = 0);

bool cuda_compiled_in();

}  // namespace ts
