#include "sampling/sampling_pipeline.h"

#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include "sampling/distribution.h"
#include "sampling/logits_processors.h"
#include "util/error.h"

namespace ts {
namespace {

void check_raw_logits(const std::vector<float>& logits) {
  if (logits.empty()) throw Error("sampling: logits are empty");
  bool any_finite = false;
  for (float x : logits) {
    if (std::isnan(x)) throw Error("logits contain NaN");
    if (std::isinf(x) && x > 0.0f) throw Error("logits contain +inf");
    any_finite = any_finite || std::isfinite(x);
  }
  if (!any_finite) throw Error("sampling: every logit is -inf, no token can be chosen");
}

int count_finite(const std::vector<float>& logits) {
  int n = 0;
  for (float x : logits) n += std::isfinite(x) ? 1 : 0;
  return n;
}

// Appends the record of one stage: `after` is the logits once it has run.
void record(std::vector<StageRecord>& stages, const char* name, bool active,
            std::vector<float> after) {
  StageRecord s;
  s.name = name;
  s.active = active;
  if (!stages.empty()) {
    const std::vector<float>& before = stages.back().logits;
    for (size_t i = 0; i < after.size(); ++i) {
      if (std::isfinite(before[i]) && !std::isfinite(after[i])) {
        s.removed_ids_here.push_back(static_cast<int>(i));
      }
    }
  }
  s.removed_here = static_cast<int>(s.removed_ids_here.size());
  s.kept = count_finite(after);
  s.logits = std::move(after);
  stages.push_back(std::move(s));
}

}  // namespace

int stage_index(const char* name) {
  for (int i = 0; i < kNumStages; ++i)
    if (std::string_view(kStageNames[i]) == name) return i;
  return -1;
}

SamplingRecord sample_next(const std::vector<float>& logits, const std::vector<int>& context_ids,
                           const SamplingParams& params, int step_index,
                           const BannedTokens* banned) {
  params.validate();
  check_raw_logits(logits);
  if (step_index < 0) throw Error("sampling: step index must be >= 0");

  SamplingRecord rec;
  rec.params = params;
  rec.step_index = step_index;
  rec.stages.reserve(kNumStages);
  const bool sample = params.do_sample;

  std::vector<float> x = logits;
  record(rec.stages, kStageNames[0], true, x);

  apply_repetition_penalty(x, context_ids, params.repetition_penalty);
  record(rec.stages, kStageNames[1], params.repetition_penalty != 1.0f, x);

  // HF's NoBadWordsLogitsProcessor: after the repetition penalty, before the
  // warpers. Unlike the filters below it may remove every token; then nothing
  // can be chosen, and the step is refused rather than drawn from nothing.
  if (banned) {
    apply_banned_words(x, *banned, context_ids);
    if (count_finite(x) == 0)
      throw Error("banned words: every token is banned after this context (" +
                  std::to_string(banned_ids_for_context(*banned, context_ids).size()) +
                  " banned ids from " + banned->source +
                  "); nothing can be chosen: switch the list off or shorten it");
  }
  record(rec.stages, kStageNames[2], banned != nullptr, x);

  const bool temperature_on = sample && params.temperature != 1.0f;
  if (temperature_on) apply_temperature(x, params.temperature);
  record(rec.stages, kStageNames[3], temperature_on, x);

  const bool top_k_on = sample && params.top_k > 0;
  if (top_k_on) apply_top_k(x, params.top_k);
  record(rec.stages, kStageNames[4], top_k_on, x);

  const bool top_p_on = sample && params.top_p < 1.0f;
  if (top_p_on) apply_top_p(x, params.top_p);
  record(rec.stages, kStageNames[5], top_p_on, x);

  const bool min_p_on = sample && params.min_p > 0.0f;
  if (min_p_on) apply_min_p(x, params.min_p);
  record(rec.stages, kStageNames[6], min_p_on, x);

  rec.final_probs = softmax(x);
  if (sample) {
    rec.draw = draw_sample(x, rec.final_probs, uniform_for_step(params.seed, step_index));
  } else {
    rec.draw = draw_greedy(x, rec.final_probs);
  }
  record(rec.stages, kStageNames[7], true, std::move(x));
  return rec;
}

}  // namespace ts
