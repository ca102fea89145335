#include "session/dola_lane.h"

#include "engine/logit_lens.h"
#include "util/error.h"

namespace ts {

std::vector<int> dola_layers_for(const SamplingParams& params, const ModelConfig& config) {
  return dola_candidate_layers(params.dola_mode, params.dola_layers, config.n_layer,
                               config.tied_embeddings);
}

std::shared_ptr<const DolaStep> dola_for_record(const ModelWeights& weights,
                                                const SamplingParams& params,
                                                const std::vector<float>& final_logits,
                                                const std::vector<float>& residuals) {
  const ModelConfig& cfg = weights.config;
  const std::vector<int> layers = dola_layers_for(params, cfg);
  if (residuals.size() != static_cast<size_t>(cfg.n_layer + 1) * cfg.n_embd)
    throw Error("dola: this step has no recorded residual stream");
  std::vector<std::vector<float>> premature;
  premature.reserve(layers.size());
  for (int l : layers)
    premature.push_back(
        early_exit_logits(weights, residuals.data() + static_cast<size_t>(l) * cfg.n_embd));
  return std::make_shared<const DolaStep>(dola_step(final_logits, layers, premature));
}

}  // namespace ts
