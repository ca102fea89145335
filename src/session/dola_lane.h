#pragma once
// The session's side of a DoLa lane: checking its layers against the model
// and turning one record's final logits and residual rows into a DolaStep
// (sampling/dola.h does the arithmetic).
#include <memory>
#include <vector>

#include "model/weights.h"
#include "sampling/dola.h"
#include "sampling/sampling_params.h"

namespace ts {

// The candidate layers of a DoLa strategy on this model (GPT-2 ties its
// word embeddings). Throws ts::Error (one line) for a layer the model does
// not have; params must be a DoLa strategy.
std::vector<int> dola_layers_for(const SamplingParams& params, const ModelConfig& config);

// One step of a DoLa lane: residuals are the record's [n_layer + 1][C] rows
// (embedding, then after each block, before ln_f); the premature logits are
// the unembedding of the candidate rows without ln_f. Throws ts::Error when
// the record has no residual stream.
std::shared_ptr<const DolaStep> dola_for_record(const ModelWeights& weights,
                                                const SamplingParams& params,
                                                const std::vector<float>& final_logits,
                                                const std::vector<float>& residuals);

}  // namespace ts
