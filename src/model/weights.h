#pragma once
// GPT-2 weights in the one layout every backend reads: fp32, row-major,
// linear layers stored [in, out] (HF Conv1D orientation), wte [vocab, C].
// The loaders copy (F32) or convert (F16/BF16, llm.c) the tensors once into
// one owned buffer (util/anonymous_memory.h), or with little memory available
// use aligned F32 in place from the file map; `storage` keeps either alive.
// convert_weights (model_loader.h) may then store the matmul weights in a
// 16-bit or block format (`format`): their float pointers are then null and
// the `*_packed` pointers hold them in that format: 16-bit values in the same
// row-major layout; q8 / q4 blocks of 32 along each row of wte and lm_head
// and of each layer matrix stored transposed, [out, in] (weight_format.h).
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
  // The four matrices above in ModelWeights::format when it is not fp32.
  const void* attn_qkv_packed = nullptr;
  const void* attn_proj_packed = nullptr;
  const void* mlp_fc_packed = nullptr;
  const void* mlp_proj_packed = nullptr;
};

// A matmul weight as the kernels take it: fp32 values, or values of `format`
// (16-bit in the same row-major layout; q8 / q4 blocks along each row, a
// layer matrix's rows being its outputs: see above).
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
  // The format of wte and the layers' four matrices; wte_packed holds wte
  // when it is not fp32 (wte is then null).
  WeightFormat format = WeightFormat::kF32;
  const void* wte_packed = nullptr;
  // An untied unembedding [vocab_size, C] (Llama family), null when tied.
  const float* lm_head = nullptr;
  const void* lm_head_packed = nullptr;

  MatrixView matrix(const float* f32, const void* packed) const {
    return format == WeightFormat::kF32 ? MatrixView{f32, format} : MatrixView{packed, format};
  }
  MatrixView wte_matrix() const { return matrix(wte, wte_packed); }
  // What the logits are read with: lm_head when untied, else wte.
  MatrixView unembedding() const {
    return lm_head || lm_head_packed ? matrix(lm_head, lm_head_packed) : wte_matrix();
  }
  MatrixView qkv(const LayerWeights& l) const {
    return matrix(l.attn_qkv_weight, l.attn_qkv_packed);
  }
  MatrixView attn_proj(const LayerWeights& l) const {
    return matrix(l.attn_proj_weight, l.attn_proj_packed);
  }
  MatrixView fc(const LayerWeights& l) const { return matrix(l.mlp_fc_weight, l.mlp_fc_packed); }
  MatrixView mlp_proj(const LayerWeights& l) const {
    return matrix(l.mlp_proj_weight, l.mlp_proj_packed);
  }

  std::string source;         // path it was loaded from, for messages
  std::string storage_dtype;  // "F32", "F16", "BF16" as stored on disk
  // Owns the memory map and any converted buffers the pointers above use.
  std::shared_ptr<const void> storage;
};

}  // namespace ts
