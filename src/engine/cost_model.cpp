#include "engine/cost_model.h"

namespace ts {

StepCost estimate_step_cost(const ModelConfig& cfg, const std::vector<EntryShape>& entries,
                            WeightFormat format, WeightFormat kv_format) {
  const double mb =
      bytes_per_value(format);  // a matmul weight's (and wte's) bytes, scales included
  // A cached K or V value's bytes, q8's scales included (34/32: every head's
  // slice of a row is whole blocks).
  const double kb = bytes_per_value(kv_format);
  const double c = cfg.n_embd, l = cfg.n_layer, v = cfg.vocab_size;
  const double q = cfg.q_dim(), kv = cfg.kv_dim(), qkv = cfg.qkv_dim(), fc = cfg.fc_dim(),
               mlp = cfg.mlp_dim();
  const bool gpt2 = cfg.is_gpt2();
  StepCost cost;
  double rows = 0, logit_rows = 0;
  for (const EntryShape& e : entries) {
    rows += e.new_tokens;
    logit_rows += e.logit_rows;
    // Row r attends over start_pos + r + 1 keys: QK^T and PV, 2 FLOPs each
    // per element of every query head.
    double keys = 0;
    for (int r = 0; r < e.new_tokens; ++r) keys += e.start_pos + r + 1;
    cost.flops += l * 4.0 * q * keys;
    // The cache holds the KV heads only (fewer under grouped-query attention).
    const double context = e.start_pos + e.new_tokens;
    cost.kv_read_bytes += l * 2.0 * context * kv * kb;
    cost.kv_write_bytes += l * 2.0 * e.new_tokens * kv * kb;
  }
  // qkv + proj + fc (SwiGLU: gate | up) + fc_proj per layer and row
  // (GPT-2: 3C^2 + C^2 + 4C^2 + 4C^2 = 12 C^2).
  const double matrix = c * qkv + q * c + c * fc + mlp * c;
  cost.flops += rows * l * 2.0 * matrix;
  cost.flops += logit_rows * 2.0 * c * v;
  // Per layer: the matrices in `format`; biases and norms in fp32 (GPT-2:
  // 13 C; Llama: two RMSNorm weights, plus Qwen2's q/k/v biases).
  const double vectors = gpt2 ? 2.0 * c + qkv + c + 2.0 * c + fc + c
                              : 2.0 * c + (cfg.family == ModelFamily::kQwen2 ? qkv : 0.0);
  const double per_layer = matrix * mb + vectors * 4.0;
  // + the final norm, and each row's embedding (wte, plus wpe on GPT-2).
  cost.weight_bytes =
      l * per_layer + (gpt2 ? 2.0 : 1.0) * c * 4.0 + rows * c * (mb + (gpt2 ? 4.0 : 0.0));
  if (logit_rows > 0)
    cost.weight_bytes += v * c * mb;  // the unembedding reads all of wte / lm_head
  return cost;
}

}  // namespace ts
