#pragma once
// What a lane's decoding strategy is: the parameters of the sampling pipeline
// (HF transformers' names and meanings), their validation, and the strategy
// strings the CLI and the GUI accept ("greedy", "top_p=0.9,temperature=0.8").
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/beam_search.h"
#include "sampling/dola.h"
#include "sampling/lookahead.h"

namespace ts {

inline constexpr float kDefaultPenaltyAlpha = 0.6f;

struct SamplingParams {
  bool do_sample = false;           // false = greedy (argmax after the repetition penalty)
  float temperature = 1.0f;         // > 0 when sampling; 1 = off
  int top_k = 0;                    // 0 = off
  float top_p = 1.0f;               // in (0, 1]; 1 = off
  float min_p = 0.0f;               // in [0, 1]; 0 = off
  float repetition_penalty = 1.0f;  // > 0; 1 = off; applies to greedy too
  uint64_t seed = 0;                // only used when sampling
  // Beam search (HF generate's num_beams, length_penalty, early_stopping):
  // num_beams 1 = off, 2..kMaxBeams = a beam lane. Deterministic, so it
  // cannot be combined with sampling or the repetition penalty.
  int num_beams = 1;
  float length_penalty = 1.0f;
  EarlyStopping early_stopping = EarlyStopping::kFalse;
  // Contrastive search (HF generate's top_k + penalty_alpha): contrastive_k
  // 0 = off, 2..16 = a contrastive lane ranking that many candidates with
  // penalty_alpha in [0, 1]. Deterministic, like greedy: it cannot be
  // combined with sampling, beams or the repetition penalty.
  int contrastive_k = 0;
  float penalty_alpha = kDefaultPenaltyAlpha;
  // Speculative decoding (HF assisted generation): spec_gamma 0 = off,
  // 1..16 = a speculative lane whose draft model proposes that many tokens a
  // round, kSpecGammaAuto = adaptive (sampling/speculative.h). The other
  // fields are the warping both models' distributions go through (greedy or
  // sampled); it cannot be combined with beams or contrastive search.
  int spec_gamma = 0;
  // DoLa (HF generate's dola_layers): off, "low", "high" or an explicit list
  // of premature layers (0 = embeddings). Its contrast scores replace the
  // logits before the processors, so it combines with greedy, sampling and
  // the repetition penalty, but not with beams or contrastive search.
  // Whether the layers exist is checked against the model (session).
  DolaMode dola_mode = DolaMode::kOff;
  std::vector<int> dola_layers;  // kLayers only, in the order given
  // Lookahead decoding (lookahead=W,N,G) and prompt lookup decoding
  // (prompt_lookup=K,M): no draft model; a pass may commit several tokens,
  // each exactly as the lane's greedy or sampled choice would be
  // (sampling/lookahead.h). They combine with greedy, sampling and the
  // repetition penalty, not with beams, contrastive, spec or dola.
  bool lookahead_on = false;
  LookaheadConfig lookahead;
  bool prompt_lookup_on = false;
  PromptLookupConfig prompt_lookup;

  // Throws ts::Error naming the parameter when a value is out of range.
  void validate() const;

  bool beam_search() const { return num_beams > 1; }
  bool contrastive() const { return contrastive_k > 0; }
  bool speculative() const { return spec_gamma != 0; }
  bool dola() const { return dola_mode != DolaMode::kOff; }
  bool draft_free() const {
    return lookahead_on || prompt_lookup_on;
  }  // lookahead or prompt lookup

  bool operator==(const SamplingParams&) const = default;
};

inline constexpr int kMaxBeams = 8;
inline constexpr int kSpecGammaAuto = -1;  // spec=auto

// Parses a strategy string: comma-separated items, each a keyword ("greedy",
// "sample") or key=value with key one of temperature, top_k, top_p, min_p,
// repetition_penalty, seed, beams, length_penalty, early_stopping,
// contrastive (the number of candidates), alpha, spec (1..16 or auto:
// speculative decoding's draft tokens per round; spec alone is greedy) and dola
// (low, high or a layer list: "dola=2,4", the bare numbers after dola=
// continuing its list), lookahead (alone for the defaults, or lookahead=W,N,G,
// the bare numbers continuing it) and prompt_lookup (alone, or
// prompt_lookup=K,M). Any item except greedy / seed / repetition_penalty /
// lookahead / prompt_lookup turns sampling on. The result is validated. Unknown keys, bad numbers,
// duplicates and "greedy" mixed with sampling keys throw ts::Error naming the
// item.
SamplingParams parse_strategy(std::string_view text);

// The canonical strategy string for params; parse_strategy(format_strategy(p)) == p.
std::string format_strategy(const SamplingParams& params);

// A short human label: "greedy", "greedy · rep 1.3", "top-p 0.9 · T 0.8",
// "sample · T 0.7 · seed 7", "beams 4 · lp 0.8 · early true",
// "contrastive 4 · α 0.6", "spec 4 · greedy", "DoLa low", "DoLa 2,4 · top-p 0.9",
// "lookahead 4,3,4 · greedy", "prompt lookup 10,2 · top-p 0.9". The seed is
// shown when sampling and not 0.
std::string describe(const SamplingParams& params);

}  // namespace ts
