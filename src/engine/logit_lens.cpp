#include "engine/logit_lens.h"

#include "engine/cpu/layernorm.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/rmsnorm.h"
#include "sampling/distribution.h"
#include "util/error.h"

namespace ts {

std::vector<float> lens_logits(const ModelWeights& w, const float* residual_row) {
  const ModelConfig& cfg = w.config;
  std::vector<float> normed(cfg.n_embd), logits(cfg.vocab_size);
  if (cfg.is_gpt2())
    cpu::layernorm(residual_row, w.ln_f_weight, w.ln_f_bias, 1, cfg.n_embd, cfg.layer_norm_epsilon,
                   normed.data());
  else
    cpu::rmsnorm(residual_row, w.ln_f_weight, 1, cfg.n_embd, cfg.layer_norm_epsilon, normed.data());
  static ThreadPool pool(1);  // the lens runs on the session's worker; keep it serial
  cpu::matmul_transposed(normed.data(), 1, cfg.n_embd, w.unembedding(), cfg.vocab_size,
                         logits.data(), pool);
  return logits;
}

std::vector<float> early_exit_logits(const ModelWeights& w, const float* residual_row) {
  const ModelConfig& cfg = w.config;
  std::vector<float> logits(cfg.vocab_size);
  static ThreadPool pool(1);  // runs on the session's worker; keep it serial
  cpu::matmul_transposed(residual_row, 1, cfg.n_embd, w.unembedding(), cfg.vocab_size,
                         logits.data(), pool);
  return logits;
}

std::vector<LensRow> logit_lens(const ModelWeights& w, const std::vector<float>& residuals,
                                int count) {
  const ModelConfig& cfg = w.config;
  const size_t rows = static_cast<size_t>(cfg.n_layer) + 1;
  if (residuals.size() != rows * cfg.n_embd)
    throw Error("logit lens: this step has no recorded residual stream");
  std::vector<LensRow> out;
  for (size_t l = 0; l < rows; ++l) {
    const std::vector<float> probs = softmax(lens_logits(w, residuals.data() + l * cfg.n_embd));
    LensRow row;
    row.layer = static_cast<int>(l);
    for (int id : top_n(probs, count)) row.top.push_back({id, probs[id]});
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace ts
