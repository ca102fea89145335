#include "engine/cost_model.h"

namespace ts {

StepCost estimate_step_cost(const ModelConfig& cfg, const std::vector<EntryShape>& entries,
                            WeightFormat format, WeightFormat kv_format) {
  const double mb = bytes_per_weight(format);     // a matmul weight's (and wte's) bytes
  const double kb = bytes_per_weight(kv_format);  // a cached K or V value's bytes
  const double c = cfg.n_embd, l = cfg.n_layer, v = cfg.vocab_size;
  StepCost cost;
  double rows = 0, logit_rows = 0;
  for (const EntryShape& e : entries) {
    rows += e.new_tokens;
    logit_rows += e.logit_rows;
    // Row r attends over start_pos + r + 1 keys: QK^T and PV, 2 FLOPs each per element.
    double keys = 0;
    for (int r = 0; r < e.new_tokens; ++r) keys += e.start_pos + r + 1;
    cost.flops += l * 4.0 * c * keys;
    const double context = e.start_pos + e.new_tokens;
    cost.kv_read_bytes += l * 2.0 * context * c * kb;
    cost.kv_write_bytes += l * 2.0 * e.new_tokens * c * kb;
  }
  // qkv (3C^2) + proj (C^2) + fc (4C^2) + fc_proj (4C^2) per layer and row.
  cost.flops += rows * l * 2.0 * 12.0 * c * c;
  cost.flops += logit_rows * 2.0 * c * v;
  // Per layer: the matrices (12 C^2 values) in `format`, biases and layer norms (13 C) in fp32.
  const double per_layer = 12.0 * c * c * mb + 13.0 * c * 4.0;
  cost.weight_bytes = l * per_layer + 2.0 * c * 4.0 + rows * c * (mb + 4.0);  // + wte/wpe rows
  if (logit_rows > 0) cost.weight_bytes += v * c * mb;  // the unembedding reads all of wte
  return cost;
}

}  // namespace ts
