#pragma once
// The KV cache, proved by running both ways: the same prompt and strategy
// generate N tokens once with the cache (each decode step feeds one token)
// and once without it (each step feeds the whole sequence again, the naive
// loop). Every figure is measured on the engine, nothing is derived from a
// formula except the analytic FLOPs and bytes each run also reports.
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "sampling/sampling_params.h"

namespace ts {

struct CacheRunStep {
  int context = 0;     // tokens in the sequence after the step
  int tokens_run = 0;  // tokens fed through the model in this step
  double seconds = 0;  // measured wall time of the forward pass
  StepCost cost;       // analytic FLOPs and bytes
  int chosen = -1;     // the token the strategy chose at this step (DoLa: from the contrast)
};

struct CacheRun {
  std::vector<CacheRunStep> steps;  // steps[0] is the prefill
  double seconds() const;
  double flops() const;
  double bytes() const;
};

struct CacheComparison {
  std::vector<int> prompt;
  SamplingParams params;
  CacheRun on, off;
  bool same_tokens = false;
  int first_difference = -1;      // step where the chosen tokens first differ; -1: none
  double max_abs_logit_diff = 0;  // over every step's logits, on vs off
  int steps() const { return static_cast<int>(on.steps.size()); }
};

// Runs prefill + new_tokens decode steps both ways (fewer when the context
// ends first). Uses temporary cache sequences and leaves the cache as it
// found it. Throws ts::Error for an empty prompt, new_tokens < 1, or a cache
// too full to hold the run.
CacheComparison compare_kv_cache(Engine& engine, const std::vector<int>& prompt,
                                 const SamplingParams& params, int new_tokens);

nlohmann::json cache_comparison_to_json(const CacheComparison& comparison);

}  // namespace ts
