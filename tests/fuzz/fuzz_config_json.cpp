// config.json (Hugging Face GPT2Config, LlamaConfig, Qwen2Config) -> ModelConfig.
#include <cmath>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "model/config_json.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ts;
  try {
    const ModelConfig c =
        parse_config_json(std::string(reinterpret_cast<const char*>(data), size), "config.json");
    FUZZ_CHECK(c.vocab_size > 0 && c.vocab_size <= kMaxVocab);
    FUZZ_CHECK(c.n_ctx > 0 && c.n_ctx <= kMaxContext);
    FUZZ_CHECK(c.n_embd > 0 && c.n_embd <= kMaxEmbd);
    FUZZ_CHECK(c.n_head > 0 && (c.head_size > 0 || c.n_embd % c.n_head == 0));
    FUZZ_CHECK(c.kv_heads() > 0 && c.n_head % c.kv_heads() == 0);
    FUZZ_CHECK(c.q_dim() > 0 && c.q_dim() <= kMaxEmbd && c.head_dim() > 0);
    FUZZ_CHECK(c.n_layer > 0 && c.n_layer <= kMaxLayers);
    FUZZ_CHECK(c.layer_norm_epsilon > 0 && c.layer_norm_epsilon < 1 &&
               std::isfinite(c.layer_norm_epsilon));
    FUZZ_CHECK(c.parameter_count() > 0);  // the sizes' products stay in range
  } catch (const Error&) {
  }
  return 0;
}
