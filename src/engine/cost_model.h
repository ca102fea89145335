#pragma once
// Analytic cost of one forward step: the FLOPs the matrix products and the
// attention perform, and the bytes that must cross the memory bus at least
// once (weights, KV cache read and written). Activations are assumed to stay
// in cache. These are the x-axis of the roofline and the "bound" every
// measured time is compared with.
#include <vector>

#include "model/config.h"
#include "model/weight_format.h"

namespace ts {

struct StepCost {
  double flops = 0;           // multiply-adds count 2
  double weight_bytes = 0;    // weights read once (fp32, or 16-bit matmul weights)
  double kv_read_bytes = 0;   // cached K and V read by attention (once per entry), in the KV format
  double kv_write_bytes = 0;  // K and V of the new tokens, in the KV format
  double bytes() const { return weight_bytes + kv_read_bytes + kv_write_bytes; }
  double intensity() const { return bytes() > 0 ? flops / bytes() : 0; }
  StepCost& operator+=(const StepCost& o) {
    flops += o.flops;
    weight_bytes += o.weight_bytes;
    kv_read_bytes += o.kv_read_bytes;
    kv_write_bytes += o.kv_write_bytes;
    return *this;
  }
};

struct EntryShape {
  int start_pos = 0;   // cached tokens before the step
  int new_tokens = 0;  // tokens processed in the step
  int logit_rows = 1;  // rows whose logits are computed
};

// format: the matmul weights' and wte's (ModelWeights::format); the rest is
// fp32. kv_format: the KV cache's values (KvCacheShape::format).
StepCost estimate_step_cost(const ModelConfig& config, const std::vector<EntryShape>& entries,
                            WeightFormat format = WeightFormat::kF32,
                            WeightFormat kv_format = WeightFormat::kF32);

}  // namespace ts
