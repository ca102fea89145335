#pragma once
// The hyper-parameters of a decoder-only transformer (HF config.json names):
// GPT-2, or the Llama family (Llama, and Qwen2 = Llama + q/k/v biases).
#include <cstdint>

namespace ts {

// GPT-2: LayerNorm with biases, learned positions (wpe), GELU MLP, tied
// unembedding. Llama: RMSNorm (weight only), RoPE on q and k, SwiGLU MLP,
// grouped-query attention, no biases, tied or untied lm_head. Qwen2: Llama
// with biases on the q, k and v projections.
enum class ModelFamily { kGpt2, kLlama, kQwen2 };

inline const char* family_name(ModelFamily f) {
  return f == ModelFamily::kGpt2 ? "gpt2" : f == ModelFamily::kLlama ? "llama" : "qwen2";
}

struct ModelConfig {
  ModelFamily family = ModelFamily::kGpt2;
  int vocab_size = 0;  // n_vocab: rows of wte that are real tokens
  int n_ctx = 0;       // n_positions (GPT-2: rows of wpe; Llama: max_position_embeddings)
  int n_embd = 0;      // C
  int n_head = 0;      // H: query heads
  int n_layer = 0;     // L
  // Key/value heads (grouped-query attention); 0 = n_head. Query head h
  // reads KV head h / (n_head / kv_heads()).
  int n_kv_head = 0;
  int head_size = 0;                 // 0 = n_embd / n_head (Llama's optional head_dim)
  int n_inner = 0;                   // the MLP's hidden width; 0 = 4 * n_embd (GPT-2)
  float layer_norm_epsilon = 1e-5f;  // GPT-2's layer_norm_epsilon, Llama's rms_norm_eps
  float rope_theta = 10000.0f;       // RoPE base (Llama family)
  bool tied_embeddings = true;       // lm_head is wte (else ModelWeights::lm_head)

  bool is_gpt2() const { return family == ModelFamily::kGpt2; }
  int head_dim() const { return head_size > 0 ? head_size : n_head > 0 ? n_embd / n_head : 0; }
  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int q_dim() const { return n_head * head_dim(); }       // width of q and of attention's output
  int kv_dim() const { return kv_heads() * head_dim(); }  // width of k and of v
  int qkv_dim() const { return q_dim() + 2 * kv_dim(); }  // the fused qkv projection's width
  int mlp_dim() const { return n_inner > 0 ? n_inner : 4 * n_embd; }
  // Columns of the MLP's first matmul: fc (GPT-2), gate | up (SwiGLU).
  int fc_dim() const { return is_gpt2() ? mlp_dim() : 2 * mlp_dim(); }
  // Parameters actually used by the forward pass (tied lm_head counted once).
  int64_t parameter_count() const {
    const int64_t c = n_embd, qkv = qkv_dim(), q = q_dim(), fc = fc_dim(), m = mlp_dim();
    if (is_gpt2()) {
      const int64_t per_layer =
          2 * c + (c * qkv + qkv) + (q * c + c) + 2 * c + (c * fc + fc) + (m * c + c);
      return int64_t(vocab_size) * c + int64_t(n_ctx) * c + n_layer * per_layer + 2 * c;
    }
    const int64_t biases = family == ModelFamily::kQwen2 ? qkv : 0;
    const int64_t per_layer = c + c * qkv + biases + q * c + c + c * fc + m * c;
    return int64_t(vocab_size) * c * (tied_embeddings ? 1 : 2) + n_layer * per_layer + c;
  }
};

}  // namespace ts
