#pragma once
// What the user is shown about one step: immutable once published.
// A step is prefill (the prompt, one pass) or one decode step (one token per
// lane). Every lane's record holds the logits the model produced, the KV
// slots the step wrote, the attention it computed and how its strategy chose
// the next token. Full sampling stages are not stored: sample_next() on the
// stored logits reproduces them exactly, on demand.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/cost_model.h"
#include "engine/kv_cache.h"
#include "sampling/banned_words.h"
#include "sampling/beam_search.h"
#include "sampling/contrastive.h"
#include "sampling/dola.h"
#include "sampling/sampling_params.h"

namespace ts {

enum class Phase { kPrefill, kDecode };
const char* phase_name(Phase phase);

// One step of a beam lane: the tree edge by edge. `before` holds the open
// beams the step extended (candidate.parent indexes them), `after` the beams
// it kept (candidate.new_beam indexes them) and every finished hypothesis so
// far. A beam of `before` that no kept candidate names was pruned with all of
// its candidates. `final` is filled once the lane stopped: the hypotheses
// ranked best first (HF's finalize), final[0] being the lane's output.
struct BeamStep {
  std::vector<BeamCandidate> candidates;  // the 2 * num_beams best, best first
  std::shared_ptr<const BeamSearchState> before;
  std::shared_ptr<const BeamSearchState> after;
  std::vector<BeamHypothesis> final;
};

struct LaneStep {
  int lane = 0;
  std::vector<int> input_tokens;   // tokens fed through the model this step
  int start_pos = 0;               // their first position
  std::vector<int> slots_written;  // KV slots the step wrote for this lane
  int blocks_copied = 0;           // copy-on-write copies this step made
  std::vector<int> context_ids;    // every token up to and including the inputs
  std::vector<float> logits;       // [vocab] at the last position
  // attention[layer] = [head][rows][context], shared so that copying a trace
  // is cheap; a null layer was over the trace budget (or, in prefill, belongs
  // to lane 0, whose forward pass every lane shares) and is recomputed on
  // demand by Session::attention.
  std::vector<std::shared_ptr<const std::vector<float>>> attention;
  std::vector<float> residuals;  // [n_layer + 1][C] of the last position (logit lens)
  // How the next token was chosen (stages: sample_next(logits, context_ids, params, step_index,
  // banned_words.get())).
  SamplingParams params;
  int step_index = 0;  // index of the chosen token in the lane's generation
  int chosen_token = -1;
  float chosen_prob = 0;
  double uniform = 0;   // the draw's random number (0 when greedy)
  int kept_tokens = 0;  // candidates left after the filters
  double entropy = 0;   // of the model's raw distribution, nats
  // The banned-words list the choice used (null: the stage was off). Shared:
  // every record of a session points at the same list.
  std::shared_ptr<const BannedTokens> banned_words;
  // Beam lanes: the record above is the open beam that the new best beam
  // extends (inputs, logits, attention of that beam; chosen_token is the
  // token it appended); the whole step is here.
  std::shared_ptr<const BeamStep> beam;
  // Contrastive lanes: the candidates, their penalties and scores, and which
  // won (chosen_token is candidates[chosen].token). The record's own outputs
  // (inputs, logits, attention) are those of its last input token, computed
  // in the previous step's forward when it ran as a candidate.
  std::shared_ptr<const ContrastiveStep> contrastive;
  // Contrastive lanes: the last layer's state after ln_f at the last input
  // position ([C]); empty otherwise.
  std::vector<float> hidden;
  // DoLa lanes: the candidate layers, their divergences, the premature
  // layer and the contrast scores; the processors and the choice ran on
  // dola->contrast instead of logits (see choice_logits).
  std::shared_ptr<const DolaStep> dola;

  int context() const { return start_pos + static_cast<int>(input_tokens.size()); }
  int rows() const { return static_cast<int>(input_tokens.size()); }
};

// The scores the sampling pipeline ran on for this record: the raw logits,
// or a DoLa lane's contrast. sample_next(choice_logits(ls), ...) reproduces
// the record's stages.
inline const std::vector<float>& choice_logits(const LaneStep& ls) {
  return ls.dola ? ls.dola->contrast : ls.logits;
}

struct StepTrace {
  int index = 0;  // 0 = prefill, then decode steps 1, 2, ...
  Phase phase = Phase::kPrefill;
  std::vector<LaneStep> lanes;
  KvOccupancy kv_after;       // occupancy once the step's tokens are cached
  double seconds = 0;         // measured wall time of the forward pass
  StepCost cost;              // analytic FLOPs and bytes
  std::string backend;        // "cpu", "cuda"
  bool kv_cache = true;       // false: the step recomputed the whole sequence
  int recomputed_tokens = 0;  // tokens run through the model (cache off: all of them)

  int64_t memory_bytes() const;
};

using StepTracePtr = std::shared_ptr<const StepTrace>;

}  // namespace ts
