#pragma once
// The reference backend: plain fp32 on the host, multithreaded, AVX2.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend.h"
#include "model/weights.h"

namespace ts {

// threads = 0: one per hardware thread.
std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const ModelWeights> weights,
                                          int threads = 0);

}  // namespace ts
