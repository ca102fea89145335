#pragma once
// GPT-2 weights in the one layout every backend reads: fp32, row-major,
// linear layers stored [in, out] (HF Conv1D orientation), wte [vocab, C].
// The loaders copy (F32) or convert (F16/BF16, llm.c) the tensors once into
// one owned buffer (util/anonymous_memory.h), or with little memory available
// use aligned F32 in place from the file map; `storage` keeps either alive.
// convert_weights (model_loader.h) may then store the matmul weights in a
// 16-bit format (`format`): their float pointers are then null and the
// `*_half` pointers hold the same layout in 16-bit values.
//
// The Llama family (ModelConfig::family) fills the same fields, converted at
// load from nn.Linear's [out, in] to [in, out]: ln_1 / ln_2 / ln_f weights are
// the RMSNorm weights (input_layernorm, post_attention_layernorm, model.norm;
// their biases null); attn_qkv is q_proj | k_proj | v_proj side by side
// [C, q_dim + 2 kv_dim] (its bias: Qwen2's q/k/v biases, else null); attn_proj
// is o_proj [q_dim, C]; mlp_fc is gate_proj | up_proj [C, 2 I]; mlp_proj is
// down_proj [I, C]; wte is embed_tokens; wpe and every other bias are null;
// lm_head holds an untied lm_head.weight [vocab, C].
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/weight_format.h"

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
  // The four matrices above in ModelWeights::format when it is 16-bit.
  const uint16_t* attn_qkv_half = nullptr;
  const uint16_t* attn_proj_half = nullptr;
  const uint16_t* mlp_fc_half = nullptr;
  const uint16_t* mlp_proj_half = nullptr;
};

// A matmul weight as the CPU kernels take it: fp32 values, or 16-bit values
// of `format`, in the same row-major layout.
struct MatrixView {
  const void* data = nullptr;
  WeightFormat format = WeightFormat::kF32;
};

struct ModelWeights {
  ModelConfig config;
  const float* wte = nullptr;  // [vocab_size, C]; also the (tied) unembedding
  const float* wpe = nullptr;  // [n_ctx, C]
  std::vector<LayerWeights> layers;
  const float* ln_f_weight = nullptr;  // [C]
  const float* ln_f_bias = nullptr;    // [C]
  // The format of wte and the layers' four matrices; wte_half holds wte
  // when it is 16-bit (wte is then null).
  WeightFormat format = WeightFormat::kF32;
  const uint16_t* wte_half = nullptr;
  // An untied unembedding [vocab_size, C] (Llama family), null when tied.
  const float* lm_head = nullptr;
  const uint16_t* lm_head_half = nullptr;

  MatrixView matrix(const float* f32, const uint16_t* half) const {
    return format == WeightFormat::kF32 ? MatrixView{f32, format} : MatrixView{half, format};
  }
  MatrixView wte_matrix() const { return matrix(wte, wte_half); }
  // What the logits are read with: lm_head when untied, else wte.
  MatrixView unembedding() const {
    return lm_head || lm_head_half ? matrix(lm_head, lm_head_half) : wte_matrix();
  }
  MatrixView qkv(const LayerWeights& l) const { return matrix(l.attn_qkv_weight, l.attn_qkv_half); }
  MatrixView attn_proj(const LayerWeights& l) const {
    return matrix(l.attn_proj_weight, l.attn_proj_half);
  }
  MatrixView fc(const LayerWeights& l) const { return matrix(l.mlp_fc_weight, l.mlp_fc_half); }
  MatrixView mlp_proj(const LayerWeights& l) const {
    return matrix(l.mlp_proj_weight, l.mlp_proj_half);
  }

  std::string source;         // path it was loaded from, for messages
  std::string storage_dtype;  // "F32", "F16", "BF16" as stored on disk
  // Owns the memory map and any converted buffers the pointers above use.
  std::shared_ptr<const void> storage;
};

}  // namespace ts
