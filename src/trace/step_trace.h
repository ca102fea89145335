#pragma once
// What the user is shown about one step: immutable once published.
// A step is prefill (the prompt, one pass) or one decode step (one token per
// lane). Every lane's record holds the logits the model produced, the KV
// slots the step wrote, the attention it computed and how its strategy chose
// the next token. Full sampling stages are not stored: sample_next() on the
// stored logits reproduces them exactly, on demand.
#include <algorithm>
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
#include "sampling/lookahead.h"
#include "sampling/sampling_params.h"
#include "sampling/speculative.h"

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

// One round of a speculative lane (sampling/speculative.h): the draft's
// proposals, the target's verify pass over them and the verdict. Rows are
// raw logits; the warped distributions p and q are sample_next() of them
// with the record's params, banned words and the row's context (the lane's
// tokens before the round, then the draft tokens before that row).
struct SpecDraftToken {
  int token = -1;
  float q = 0;             // the draft's warped probability of it
  float p = 0;             // the target's warped probability of it
  double ratio = 0;        // p / q (sampled lanes)
  double uniform = 0;      // u compared with the ratio (sampled lanes)
  int target_choice = -1;  // greedy lanes: the target's argmax at this row
  bool checked = false;    // false: after a rejection, never looked at
  bool accepted = false;
};

struct SpecRound {
  int gamma_planned = 0;     // γ the strategy asked for (spec=auto: its current value)
  int gamma = 0;             // γ drafted: clamped to the tokens and context left
  std::string clamp_reason;  // why gamma < gamma_planned (empty when it is not)
  int gamma_next = 0;        // γ the next round plans (spec=auto adapts it)
  bool sampled = false;
  std::vector<SpecDraftToken> drafts;             // gamma entries
  std::vector<std::vector<float>> draft_logits;   // gamma rows: q_i's logits
  std::vector<std::vector<float>> target_logits;  // gamma + 1 rows: the verify pass
  int accepted = 0;
  int next_token = -1;  // the target's token after the accepted drafts
  SpecNext next = SpecNext::kBonus;
  double next_uniform = 0;         // its draw (sampled lanes)
  std::vector<float> residual;     // norm(max(0, p - q)) at a sampled rejection
  bool residual_fallback = false;  // p - q had no positive mass: drawn from p
  std::vector<int> committed;      // tokens the lane took (cut after an end of text)
  int first_index = 0;             // index in the lane's generation of committed[0]
  // The KV caches: lengths before the round and after its truncation, and
  // the slots the verify / draft passes wrote that the truncation gave back.
  int target_before = 0, target_after = 0;
  int draft_before = 0, draft_after = 0;
  std::vector<int> target_slots_released;
  std::vector<int> draft_slots_released;
  int target_blocks_freed = 0, draft_blocks_freed = 0;
  // Cost of each side, measured and analytic.
  int draft_passes = 0;
  int draft_tokens_fed = 0;  // the first pass may feed two (after an all-accepted round)
  double draft_seconds = 0;
  StepCost draft_cost;
  double verify_seconds = 0;
  StepCost verify_cost;
};

// What a lookahead lane carries from pass to pass: its Jacobi window and
// n-gram pool (sampling/lookahead.h). Immutable once made: a pass makes a
// new one, and undoing the pass goes back to the old.
struct LookaheadState {
  LookaheadWindow window;
  NgramPool pool;
};

// One pass of lookahead decoding or prompt lookup (session/lookahead_lane.h).
struct LookaheadPass {
  bool prompt_lookup = false;
  int start_pos = 0;    // x's position (the cached tokens before the pass)
  int first_index = 0;  // index in the lane's generation of the first committed token
  LookaheadPassLayout layout;
  LookaheadVerdict verdict;
  std::vector<int> committed;              // the verdict's tokens, cut after an end of text
  LookaheadWindow window;                  // before the pass (lookahead only)
  std::vector<int> window_outputs;         // the model's guess after each last-row cell
  int pool_size = 0;                       // n-grams in the pool before the pass
  int new_ngrams = 0;                      // n-grams this pass added
  std::vector<int> slots;                  // KV slots the pass wrote (every fed row)
  std::vector<std::vector<float>> logits;  // the row each committed token was chosen at
  std::vector<std::vector<float>> probs;   // the lane's distribution at those rows
  double seconds = 0;
  StepCost cost;
  std::shared_ptr<const LookaheadState> state_before, state_after;  // null for prompt lookup
  int fed() const { return static_cast<int>(layout.tokens.size()); }
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
  // Speculative lanes: the round. The record's inputs are the verify pass's
  // (the lane's pending token and the γ drafts), its attention that pass's
  // γ + 1 rows; logits, chosen_token and step_index are those of the round's
  // last committed token (the row it was chosen from).
  std::shared_ptr<const SpecRound> spec;
  // Lookahead and prompt-lookup lanes: the pass. As for a speculative round,
  // the record's inputs are the pass's fed rows (x, candidates, window) and
  // its logits, chosen_token and step_index those of the last committed token.
  std::shared_ptr<const LookaheadPass> lookahead;
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

// The tokens a record's token was chosen after (what the repetition penalty
// and the banned words looked at): its context, or for a speculative round
// the verify pass's context up to the row of its last committed token.
inline std::vector<int> choice_context(const LaneStep& ls) {
  if (!ls.spec) return ls.context_ids;
  const size_t end = std::min(ls.context_ids.size(),
                              static_cast<size_t>(ls.start_pos) + ls.spec->committed.size());
  return std::vector<int>(ls.context_ids.begin(), ls.context_ids.begin() + static_cast<long>(end));
}

// Which lane (and, in a beam lane, which open beam) held a sequence of the
// target model's cache once the step was done.
struct KvSequenceOwner {
  SeqId seq = -1;
  int lane = 0;
  int beam = -1;  // -1: the lane's only sequence
};

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
  // kv_after's sequences that a lane held.
  std::vector<KvSequenceOwner> kv_owners;

  int64_t memory_bytes() const;
};

using StepTracePtr = std::shared_ptr<const StepTrace>;

}  // namespace ts
