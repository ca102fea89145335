// A beam-search lane: its beams are sequences of their own, advanced together
// in one batched forward; each step keeps the num_beams best continuations.
#include "session/session.h"

#include <cmath>

#include "sampling/distribution.h"

namespace ts {

BeamSearchConfig Session::beam_config(const Lane& lane) const {
  BeamSearchConfig c;
  c.num_beams = lane.params.num_beams;
  c.length_penalty = lane.params.length_penalty;
  c.early_stopping = lane.params.early_stopping;
  c.max_new_tokens = options_.max_new_tokens;
  c.eos_id = tokenizer_->eot_id();
  return c;
}

LaneStep Session::advance_beams(const Lane& lane, std::vector<LaneStep> per_beam) const {
  // As in HF, the logits processors (here the banned words) act on each
  // beam's log-softmax row before the beams are scored.
  std::vector<std::vector<float>> rows;
  for (const LaneStep& ls : per_beam) {
    rows.push_back(log_softmax(ls.logits));
    if (banned_words_) apply_banned_words(rows.back(), *banned_words_, ls.context_ids);
  }
  const BeamSearchConfig config = beam_config(lane);
  auto step = std::make_shared<BeamStep>();
  step->before = lane.beams;
  auto after = std::make_shared<BeamSearchState>(*lane.beams);
  step->candidates = beam_search_step(*after, rows, config);
  int best_parent = 0;
  for (const BeamCandidate& c : step->candidates)
    if (c.new_beam == 0) best_parent = c.parent;
  // Every open beam fed its newest token: the lane's record holds all the
  // slots and copies the step made, not only the best beam's.
  std::vector<int> slots;
  int copies = 0;
  for (const LaneStep& b : per_beam) {
    slots.insert(slots.end(), b.slots_written.begin(), b.slots_written.end());
    copies += b.blocks_copied;
  }
  LaneStep ls = std::move(per_beam[best_parent]);
  ls.slots_written = std::move(slots);
  ls.blocks_copied = copies;
  const Beam& best = after->beams[0];
  ls.params = lane.params;
  ls.banned_words = banned_words_;
  ls.chosen_token = best.tokens.back();
  ls.chosen_prob = std::exp(best.token_log_probs.back());
  ls.uniform = 0;
  ls.kept_tokens = static_cast<int>(after->beams.size());
  const int n_ctx = engine_->config().n_ctx;
  if (after->done || after->steps >= options_.max_new_tokens || ls.context() >= n_ctx)
    step->final = beam_search_finalize(*after, config);
  step->after = std::move(after);
  ls.beam = std::move(step);
  return ls;
}

void Session::commit_beams(Lane& lane, const LaneStep& ls) {
  const BeamStep& step = *ls.beam;
  // A kept beam continues its parent's sequence, which now caches the
  // parent's last token: fork it (blocks shared, copy-on-write), then let the
  // old sequences go, which frees what only pruned beams held.
  if (!lane.beam_seqs.empty()) {
    KvCacheManager& cache = engine_->cache();
    std::vector<SeqId> seqs(step.after->beams.size(), -1);
    for (const BeamCandidate& c : step.candidates)
      if (c.fate == CandidateFate::kKept) seqs[c.new_beam] = cache.fork(lane.beam_seqs[c.parent]);
    for (SeqId old : lane.beam_seqs) cache.release(old);
    lane.beam_seqs = std::move(seqs);
    lane.seq = lane.beam_seqs[0];
  }
  lane.beams = step.after;
  lane.generated = step.after->beams[0].tokens;
  lane.stop_reason.clear();
  if (step.final.empty()) return;
  const BeamHypothesis& best = step.final[0];
  lane.generated = best.tokens;
  if (best.ended_by_eos) lane.generated.push_back(tokenizer_->eot_id());
  const int n_ctx = engine_->config().n_ctx;
  if (step.after->done)
    lane.stop_reason = "beam search done";
  else if (step.after->steps >= options_.max_new_tokens)
    lane.stop_reason = "token limit (" + std::to_string(options_.max_new_tokens) + ")";
  else
    lane.stop_reason = "context end: the model holds " + std::to_string(n_ctx) + " tokens";
}

}  // namespace ts
