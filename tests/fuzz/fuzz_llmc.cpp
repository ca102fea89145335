// llm.c checkpoints: the 256-int header (magic, version 3 = fp32 or 5 =
// bf16, sizes) and the packed parameters it implies.
#include <cmath>
#include <cstdint>

#include "fuzz_check.h"
#include "model/llmc_loader.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ts;
  try {
    const ModelWeights w = load_llmc_image(data, size, "fuzz.bin");
    const ModelConfig& c = w.config;
    FUZZ_CHECK(c.vocab_size > 0 && c.n_ctx > 0 && c.n_layer > 0 && c.n_head > 0);
    FUZZ_CHECK(c.n_embd % c.n_head == 0);
    FUZZ_CHECK(static_cast<int>(w.layers.size()) == c.n_layer);
    FUZZ_CHECK(w.storage_dtype == "F32" || w.storage_dtype == "BF16");
    // Every tensor is readable: touch the first and last value of each.
    const auto touch = [](const float* p, int64_t n) {
      FUZZ_CHECK(p != nullptr);
      volatile float sink = p[0] + p[n - 1];
      (void)sink;
    };
    const int64_t C = c.n_embd;
    touch(w.wte, int64_t(c.vocab_size) * C);
    touch(w.wpe, int64_t(c.n_ctx) * C);
    for (const LayerWeights& l : w.layers) {
      touch(l.ln_1_weight, C);
      touch(l.attn_qkv_weight, 3 * C * C);
      touch(l.mlp_fc_weight, 4 * C * C);
      touch(l.mlp_proj_weight, 4 * C * C);
      touch(l.mlp_proj_bias, C);
    }
    touch(w.ln_f_bias, C);
  } catch (const Error&) {
  }
  return 0;
}
