#pragma once
// The logit lens: what the model would predict if it stopped after layer l.
// Each saved residual row (embedding, then after every block) goes through
// the final norm (GPT-2's layer norm, the Llama family's RMSNorm) and the
// unembedding (wte, or an untied lm_head). The row after the last
// block reproduces the model's own logits.
#include <vector>

#include "model/weights.h"

namespace ts {

struct LensPrediction {
  int token = -1;
  float prob = 0;
};

struct LensRow {
  int layer = 0;                    // 0 = embeddings, l = after block l
  std::vector<LensPrediction> top;  // most likely first
};

// residuals: [n_layer + 1][C] as recorded by the forward pass.
std::vector<LensRow> logit_lens(const ModelWeights& weights, const std::vector<float>& residuals,
                                int count = 5);
// Full logits read off one residual row (used by the test against the model).
std::vector<float> lens_logits(const ModelWeights& weights, const float* residual_row);
// The unembedding applied to a residual row WITHOUT the final layer norm:
// the early-exit logits DoLa contrasts (HF's lm_head(hidden_states[l])).
std::vector<float> early_exit_logits(const ModelWeights& weights, const float* residual_row);

}  // namespace ts
