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
