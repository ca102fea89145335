#pragma once
// config.json (Hugging Face GPT2Config) -> ts::ModelConfig, validated.
//
// Read: vocab_size, n_positions (or n_ctx when n_positions is absent), n_embd,
// n_head, n_layer, layer_norm_epsilon (default 1e-5). Checked: each size a
// positive integer within sane limits, n_embd divisible by n_head, epsilon
// positive; when present, activation_function is gelu_new (or its alias
// gelu_pytorch_tanh), model_type is gpt2, tie_word_embeddings is true,
// scale_attn_weights is true and scale_attn_by_inverse_layer_idx is false
// (the forward pass implements exactly that GPT-2). Errors name the file and
// the field.
//
// model_type "llama" (LlamaConfig) and "qwen2" (Qwen2Config) read vocab_size,
// max_position_embeddings, hidden_size, num_attention_heads,
// num_hidden_layers, intermediate_size, num_key_value_heads (default: the
// attention heads, which it must divide), head_dim (default hidden_size /
// heads; even), rms_norm_eps (default 1e-6), rope_theta (default 10000; or
// rope_parameters.rope_theta, newer transformers' spelling) and
// tie_word_embeddings (default false). Refused, naming the field: hidden_act
// other than silu, rope_scaling other than null or rope_type "default",
// rope_parameters.rope_type other than "default", partial_rotary_factor
// (top level or in rope_parameters) other than 1, use_sliding_window true,
// and on llama attention_bias or mlp_bias true. Any other model_type is
// refused.
#include <filesystem>
#include <string>

#include "model/config.h"

namespace ts {

// Upper bounds that keep every size product inside int64 (GPT-2 XL is
// vocab 50257, n_ctx 1024, n_embd 1600, n_layer 48).
inline constexpr int kMaxVocab = 1 << 24;
inline constexpr int kMaxContext = 1 << 24;
inline constexpr int kMaxEmbd = 1 << 16;
inline constexpr int kMaxLayers = 1 << 12;

// Parses config.json text; `file` names it in error messages.
ModelConfig parse_config_json(const std::string& text, const std::string& file);

// Reads and parses a config.json file.
ModelConfig load_config_json(const std::filesystem::path& path);

}  // namespace ts
