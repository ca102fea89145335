#include "model/config_json.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "model/mapped_file.h"
#include "model/safetensors.h"  // printable
#include "util/error.h"

namespace ts {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw Error(file + ": " + what);
}

// A required (or, with `fallback`, optional) positive integer field.
int read_size(const json& root, const std::string& file, const char* field, int max_value,
              const char* alias = nullptr) {
  auto it = root.find(field);
  const char* used = field;
  if (it == root.end() && alias != nullptr) {
    it = root.find(alias);
    used = alias;
  }
  if (it == root.end() || it->is_null()) {
    fail(file, std::string("missing field ") + field +
                   (alias ? std::string(" (or ") + alias + ")" : std::string()));
  }
  const json& v = *it;
  const std::string name = std::string("field ") + used;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u == 0) fail(file, name + " is 0, must be positive");
    if (u > static_cast<uint64_t>(max_value)) {
      fail(file, name + " is " + std::to_string(u) + ", larger than the supported maximum " +
                     std::to_string(max_value));
    }
    return static_cast<int>(u);
  }
  if (v.is_number_integer()) {
    fail(file, name + " is " + std::to_string(v.get<int64_t>()) + ", must be positive");
  }
  fail(file, name + " is " + printable(v.dump(), 40) + ", must be a positive integer");
}

void expect_bool(const json& root, const std::string& file, const char* field, bool want,
                 const char* why) {
  auto it = root.find(field);
  if (it == root.end() || it->is_null()) return;
  if (!it->is_boolean()) fail(file, std::string("field ") + field + " is not true/false");
  if (it->get<bool>() != want) {
    fail(file, std::string("field ") + field + " is " + (want ? "false" : "true") +
                   ", not supported (" + why + ")");
  }
}

// A positive epsilon that a 32-bit float holds: the forward pass adds it in
// 32-bit floats, so a value that rounds to 0 (e.g. 1e-85) would divide by
// zero on a constant row, one that rounds to 1 is out of range.
void read_epsilon(const json& root, const std::string& file, const char* field, float* out) {
  auto it = root.find(field);
  if (it == root.end() || it->is_null()) return;
  if (!it->is_number()) fail(file, std::string("field ") + field + " is not a number");
  const double eps = it->get<double>();
  if (!(eps > 0.0) || !std::isfinite(eps) || eps >= 1.0)
    fail(file, std::string("field ") + field + " is " + printable(it->dump(), 40) +
                   ", must be in (0, 1)");
  const float eps32 = static_cast<float>(eps);
  if (!(eps32 >= std::numeric_limits<float>::min() && eps32 < 1.0f)) {
    fail(file, std::string("field ") + field + " is " + printable(it->dump(), 40) +
                   ", outside what a 32-bit float holds in (0, 1) (smallest 1.2e-38)");
  }
  *out = eps32;
}

// Llama (LlamaConfig) and Qwen2 (Qwen2Config, Llama plus q/k/v biases).
ModelConfig parse_llama(const json& root, const std::string& file, ModelFamily family) {
  ModelConfig c;
  c.family = family;
  c.vocab_size = read_size(root, file, "vocab_size", kMaxVocab);
  c.n_ctx = read_size(root, file, "max_position_embeddings", kMaxContext);
  c.n_embd = read_size(root, file, "hidden_size", kMaxEmbd);
  c.n_head = read_size(root, file, "num_attention_heads", kMaxEmbd);
  c.n_layer = read_size(root, file, "num_hidden_layers", kMaxLayers);
  c.n_inner = read_size(root, file, "intermediate_size", kMaxEmbd * 16);
  c.n_kv_head = c.n_head;
  if (root.contains("num_key_value_heads") && !root["num_key_value_heads"].is_null())
    c.n_kv_head = read_size(root, file, "num_key_value_heads", kMaxEmbd);
  if (c.n_head % c.n_kv_head != 0) {
    fail(file, "field num_attention_heads " + std::to_string(c.n_head) +
                   " is not divisible by field num_key_value_heads " + std::to_string(c.n_kv_head));
  }
  if (root.contains("head_dim") && !root["head_dim"].is_null()) {
    c.head_size = read_size(root, file, "head_dim", kMaxEmbd);
  } else if (c.n_embd % c.n_head != 0) {
    fail(file, "field hidden_size " + std::to_string(c.n_embd) +
                   " is not divisible by field num_attention_heads " + std::to_string(c.n_head));
  }
  if (int64_t{c.n_head} * c.head_dim() > kMaxEmbd) {
    fail(file, "num_attention_heads x head_dim is " +
                   std::to_string(int64_t{c.n_head} * c.head_dim()) +
                   ", larger than the supported maximum " + std::to_string(kMaxEmbd));
  }
  if (c.head_dim() % 2 != 0)
    fail(file, "head size " + std::to_string(c.head_dim()) + " is odd; RoPE needs an even one");
  c.layer_norm_epsilon = 1e-6f;  // both configs' default
  read_epsilon(root, file, "rms_norm_eps", &c.layer_norm_epsilon);
  // Newer transformers write RoPE's settings as one rope_parameters object
  // (rope_type, rope_theta, partial_rotary_factor, scaling factors); older
  // ones as top-level rope_theta / rope_scaling / partial_rotary_factor.
  const json* rope = nullptr;
  if (auto it = root.find("rope_parameters"); it != root.end() && !it->is_null()) {
    if (!it->is_object()) fail(file, "field rope_parameters is not an object");
    rope = &*it;
  }
  auto read_theta = [&](const json& obj, const std::string& field) {
    auto it = obj.find("rope_theta");
    if (it == obj.end() || it->is_null()) return;
    const double theta = it->is_number() ? it->get<double>() : 0.0;
    if (!(theta > 1.0) || !std::isfinite(theta) || theta > 1e30)
      fail(file, "field " + field + " is " + printable(it->dump(), 40) + ", must be a number > 1");
    c.rope_theta = static_cast<float>(theta);
  };
  read_theta(root, "rope_theta");
  if (rope) read_theta(*rope, "rope_parameters.rope_theta");
  // Rotary embeddings on every dimension of each head, unscaled: anything
  // else would give other logits than the model was trained with.
  auto check_partial = [&](const json& obj, const std::string& field) {
    auto it = obj.find("partial_rotary_factor");
    if (it == obj.end() || it->is_null()) return;
    if (!it->is_number() || it->get<double>() != 1.0)
      fail(file, "field " + field + " is " + printable(it->dump(), 40) +
                     ", not supported (RoPE on part of each head; only 1)");
  };
  check_partial(root, "partial_rotary_factor");
  if (rope) {
    check_partial(*rope, "rope_parameters.partial_rotary_factor");
    if (auto it = rope->find("rope_type"); it != rope->end() && !it->is_null()) {
      if (!it->is_string() || it->get<std::string>() != "default")
        fail(file, "field rope_parameters.rope_type is " + printable(it->dump(), 40) +
                       ", not supported (scaled RoPE; only \"default\")");
    }
  }
  if (auto it = root.find("hidden_act"); it != root.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>() != "silu")
      fail(file, "field hidden_act is " + printable(it->dump(), 40) + ", only silu is supported");
  }
  c.tied_embeddings = false;  // both configs' default
  if (auto it = root.find("tie_word_embeddings"); it != root.end() && !it->is_null()) {
    if (!it->is_boolean()) fail(file, "field tie_word_embeddings is not true/false");
    c.tied_embeddings = it->get<bool>();
  }
  if (auto it = root.find("rope_scaling"); it != root.end() && !it->is_null()) {
    // {"rope_type": "default"} (some exports write it) is plain RoPE.
    const json* type = it->is_object() ? (it->contains("rope_type") ? &(*it)["rope_type"]
                                          : it->contains("type")    ? &(*it)["type"]
                                                                    : nullptr)
                                       : nullptr;
    if (!type || !type->is_string() || type->get<std::string>() != "default")
      fail(file, "field rope_scaling is " + printable(it->dump(), 40) +
                     ", not supported (scaled RoPE; only null or rope_type \"default\")");
  }
  expect_bool(root, file, "use_sliding_window", false, "sliding-window attention");
  if (family == ModelFamily::kLlama) {
    expect_bool(root, file, "attention_bias", false, "biases on the attention projections");
    expect_bool(root, file, "mlp_bias", false, "biases on the MLP projections");
  }
  return c;
}

ModelConfig parse_gpt2(const json& root, const std::string& file) {
  ModelConfig c;
  c.vocab_size = read_size(root, file, "vocab_size", kMaxVocab);
  c.n_ctx = read_size(root, file, "n_positions", kMaxContext, "n_ctx");
  // Older configs carry n_ctx beside n_positions: it is checked too, not
  // ignored (a context of 0 or less is refused naming it).
  if (root.contains("n_positions") && root.contains("n_ctx") && !root["n_ctx"].is_null())
    read_size(root, file, "n_ctx", kMaxContext);
  c.n_embd = read_size(root, file, "n_embd", kMaxEmbd);
  c.n_head = read_size(root, file, "n_head", kMaxEmbd);
  c.n_layer = read_size(root, file, "n_layer", kMaxLayers);
  if (c.n_embd % c.n_head != 0) {
    fail(file, "field n_embd " + std::to_string(c.n_embd) + " is not divisible by field n_head " +
                   std::to_string(c.n_head));
  }

  read_epsilon(root, file, "layer_norm_epsilon", &c.layer_norm_epsilon);

  if (auto it = root.find("activation_function"); it != root.end() && !it->is_null()) {
    if (!it->is_string()) fail(file, "field activation_function is not a string");
    const std::string act = it->get<std::string>();
    if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
      fail(file, "field activation_function is \"" + printable(act, 40) +
                     "\", only gelu_new (tanh approximation) is supported");
    }
  }
  expect_bool(root, file, "tie_word_embeddings", true, "untied lm_head");
  expect_bool(root, file, "scale_attn_weights", true, "unscaled attention");
  expect_bool(root, file, "scale_attn_by_inverse_layer_idx", false,
              "attention scaled by inverse layer index");
  return c;
}

}  // namespace

ModelConfig parse_config_json(const std::string& text, const std::string& file) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    fail(file, e.byte > text.size()
                   ? std::string("not valid JSON (it ends early)")
                   : "not valid JSON (error at byte " + std::to_string(e.byte) + ")");
  } catch (const json::exception&) {
    fail(file, "not valid JSON");
  }
  if (!root.is_object()) fail(file, "not a JSON object");

  const auto type = root.find("model_type");
  if (type == root.end() || type->is_null()) return parse_gpt2(root, file);
  const std::string name = type->is_string() ? type->get<std::string>() : std::string();
  if (name == "gpt2") return parse_gpt2(root, file);
  if (name == "llama") return parse_llama(root, file, ModelFamily::kLlama);
  if (name == "qwen2") return parse_llama(root, file, ModelFamily::kQwen2);
  fail(file, "field model_type is " + printable(type->dump(), 40) +
                 ", expected \"gpt2\", \"llama\" or \"qwen2\"");
}

ModelConfig load_config_json(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(file, "not found");
  // Refuses FIFOs and devices before opening (a FIFO would block forever).
  return parse_config_json(read_regular_file(path, 16u << 20, "a config"), file);
}

}  // namespace ts
