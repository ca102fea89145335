#pragma once
// How the next token is chosen, stage by stage, with everything recorded for
// the GUI and the trace: raw -> repetition_penalty -> banned_words ->
// temperature -> top_k -> top_p -> min_p -> final, then the draw (or the argmax
// when greedy). HF transformers' order and semantics (the banned-words stage is
// its NoBadWordsLogitsProcessor, which HF runs after the repetition penalty and
// before the warpers: sampling/banned_words.h); greedy applies only the
// repetition penalty and the banned words (the other stages are recorded as
// inactive). A pure function: the same logits, context, params, step and list
// give the same record on every run.
#include <string>
#include <vector>

#include "sampling/banned_words.h"
#include "sampling/draw.h"
#include "sampling/sampling_params.h"

namespace ts {

// Stage names in pipeline order; StageRecord::name is one of these.
inline constexpr const char* kStageNames[] = {
    "raw", "repetition_penalty", "banned_words", "temperature", "top_k", "top_p", "min_p", "final"};
inline constexpr int kNumStages = 8;
// Index of a stage in kStageNames, e.g. stage_index("top_p"); -1 for none.
int stage_index(const char* name);

struct StageRecord {
  std::string name;                   // one of kStageNames
  bool active = false;                // false: this strategy skips the stage (logits unchanged)
  std::vector<float> logits;          // after the stage; -inf for every token removed so far
  int kept = 0;                       // tokens with a finite logit after the stage
  int removed_here = 0;               // tokens this stage set to -inf (kept = previous kept - this)
  std::vector<int> removed_ids_here;  // those tokens, ascending id
};

struct SamplingRecord {
  SamplingParams params;
  int step_index = 0;
  std::vector<StageRecord> stages;  // kNumStages entries, in kStageNames order
  std::vector<float> final_probs;   // softmax of the final logits
  DrawRecord draw;
};

// Runs the pipeline on one step's logits. context_ids are the tokens the
// repetition penalty and the banned words look at (prompt and generated so
// far); banned is the banned-words list (null: the stage is off); step_index picks
// the random number (uniform_for_step(params.seed, step_index)). Throws
// ts::Error for invalid params, empty logits, NaN ("logits contain NaN") or
// +inf logits, all logits -inf, a context id outside the vocabulary, a
// negative step_index, or a list that bans every token still finite ("banned
// words: every token is banned after this context ...": nothing is chosen).
SamplingRecord sample_next(const std::vector<float>& logits, const std::vector<int>& context_ids,
                           const SamplingParams& params, int step_index,
                           const BannedTokens* banned = nullptr);

}  // namespace ts
