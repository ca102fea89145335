#pragma once
// GPT-2 weights in the one layout every backend reads: fp32, row-major,
// linear layers stored [in, out] (HF Conv1D orientation), wte [vocab, C].
// The loaders copy (F32) or convert (F16/BF16, llm.c) the tensors once into
// one owned buffer (util/anonymous_memory.h), or with little memory available
// use aligned F32 in place from the file map; `storage` keeps either alive.
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"

namespace ts {

struct LayerWeights {
  const float* ln_1_weight = nullptr;       // [C]
  const float* ln_1_bias = nullptr;         // [C]
  const float* attn_qkv_weight = nullptr;   // [C, 3C]  (attn.c_attn.weight)
  const float* attn_qkv_bias = nullptr;     // [3C]
  const float* attn_proj_weight = nullptr;  // [C, C]   (attn.c_proj.weight)
  const float* attn_proj_bias = nullptr;    // [C]
  const float* ln_2_weight = nullptr;       // [C]
  const float* ln_2_bias = nullptr;         // [C]
  const float* mlp_fc_weight = nullptr;     // [C, 4C]  (mlp.c_fc.weight)
  const float* mlp_fc_bias = nullptr;       // [4C]
  const float* mlp_proj_weight = nullptr;   // [4C, C]  (mlp.c_proj.weight)
  const float* mlp_proj_bias = nullptr;     // [C]
};

struct ModelWeights {
  ModelConfig config;
  const float* wte = nullptr;  // [vocab_size, C]; also the (tied) unembedding
  const float* wpe = nullptr;  // [n_ctx, C]
  std::vector<LayerWeights> layers;
  const float* ln_f_weight = nullptr;  // [C]
  const float* ln_f_bias = nullptr;    // [C]

  std::string source;         // path it was loaded from, for messages
  std::string storage_dtype;  // "F32", "F16", "BF16" as stored on disk
  // Owns the memory map and any converted buffers the pointers above use.
  std::shared_ptr<const void> storage;
};

}  // namespace ts
