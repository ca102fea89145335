#pragma once
// The hyper-parameters of a GPT-2-class model (HF config.json names).
#include <cstdint>

namespace ts {

struct ModelConfig {
  int vocab_size = 0;  // n_vocab: rows of wte that are real tokens
  int n_ctx = 0;       // n_positions: rows of wpe
  int n_embd = 0;      // C
  int n_head = 0;      // H
  int n_layer = 0;     // L
  float layer_norm_epsilon = 1e-5f;

  int head_dim() const { return n_head > 0 ? n_embd / n_head : 0; }
  // Parameters actually used by the forward pass (tied lm_head counted once).
  int64_t parameter_count() const {
    const int64_t c = n_embd;
    const int64_t per_layer =
        2 * c + (c * 3 * c + 3 * c) + (c * c + c) + 2 * c + (c * 4 * c + 4 * c) + (4 * c * c + c);
    return int64_t(vocab_size) * c + int64_t(n_ctx) * c + n_layer * per_layer + 2 * c;
  }
};

}  // namespace ts
