#pragma once
// DoLa, Decoding by Contrasting Layers (Chuang et al., 2023), with Hugging
// Face transformers' semantics (generate(dola_layers=...), before it moved
// to the hub):
//
//  * candidate premature layers: hidden-state indices, 0 = the embedding
//    output, l = the output of block l. "low" / "high" take every second
//    layer of the lower / upper half (for models of more than 40 layers: of
//    the first / last 20); with tied word embeddings "low" starts at 2 (at 1
//    for a 2-layer model), since layer 0 read through the tied unembedding
//    says little more than "the same token again". An explicit list is used
//    as given (each must be below the number of layers).
//  * early logits: the unembedding (lm_head = wte for GPT-2) applied to the
//    layer's hidden state WITHOUT the final layer norm, as HF does.
//  * premature layer: the candidate whose distribution diverges most from
//    the final one. HF's divergence is 0.5 * (KL(M || P_final) +
//    KL(M || P_layer)) with M their average (torch's kl_div(log q, M) is
//    M * (log M - log q): the KL arguments are the other way round from the
//    textbook Jensen-Shannon divergence), then averaged over the vocabulary.
//    dola_divergence returns the sum over the vocabulary (vocab times HF's
//    value): the same argmax, numbers a reader can compare across models.
//    With a single candidate nothing is computed: it is the premature layer.
//  * relative-top filter: tokens with log p_final < log max p_final + log 0.1
//    are dropped (-inf); the others get log p_final - log p_premature.
//  * these contrast scores then go through the usual processors (repetition
//    penalty, banned words, and when sampling temperature / top-k / top-p /
//    min-p) and the argmax or the draw, exactly as plain logits would. HF
//    recommends repetition_penalty >= 1.2 with DoLa.
// Pure functions: the session supplies the logits, these do the arithmetic.
#include <string>
#include <vector>

namespace ts {

enum class DolaMode { kOff, kLow, kHigh, kLayers };

inline constexpr double kDolaRelativeTop = 0.1;
inline constexpr int kDolaTopTokens = 8;  // tokens a step records in detail

// "low" / "high" / "2,4": the strategy item's value (format_strategy's).
std::string dola_layers_text(DolaMode mode, const std::vector<int>& layers);

// HF's candidate rule for an n_layer model. layers: the explicit list
// (kLayers). Throws ts::Error (one line) for kOff, n_layer < 1, an empty
// list, a layer outside [0, n_layer), a duplicate, and "low" on a depth where
// the rule picks no layer (3 layers with tied embeddings).
std::vector<int> dola_candidate_layers(DolaMode mode, const std::vector<int>& layers, int n_layer,
                                       bool tied_embeddings = true);

// HF's divergence between the final and a premature distribution, summed
// over the vocabulary (see above), in double. Throws on mismatched sizes.
double dola_divergence(const std::vector<float>& final_logits,
                       const std::vector<float>& premature_logits);

// The relative-top filter and the contrast: -inf for every token with
// log p_final < max log p_final + log(relative_top), else
// log p_final - log p_premature.
std::vector<float> dola_contrast(const std::vector<float>& final_logits,
                                 const std::vector<float>& premature_logits,
                                 double relative_top = kDolaRelativeTop);

struct DolaToken {
  int token = -1;
  float final_logp = 0;      // log p_final
  float premature_logp = 0;  // log p at the premature layer
  float contrast = 0;        // final_logp - premature_logp
  int final_rank = 0;        // 0 = the final layer's own favourite
};

struct DolaStep {
  std::vector<int> candidate_layers;
  std::vector<float> divergence;  // per candidate (0 when there is only one: not computed)
  int premature_layer = -1;
  int kept = 0;  // tokens that passed the relative-top filter
  // The kept tokens (at most kDolaTopTokens), highest contrast first.
  std::vector<DolaToken> top;
  // The contrast scores over the whole vocabulary: what the processors and
  // the choice see instead of the raw logits.
  std::vector<float> contrast;
};

// One step: premature_logits[i] belongs to candidate_layers[i]. The first of
// equal divergences wins (torch's argmax). Throws ts::Error on empty input
// or mismatched sizes.
DolaStep dola_step(const std::vector<float>& final_logits, const std::vector<int>& candidate_layers,
                   const std::vector<std::vector<float>>& premature_logits);

}  // namespace ts
