#include "trace/step_trace.h"

namespace ts {

const char* phase_name(Phase phase) { return phase == Phase::kPrefill ? "prefill" : "decode"; }

namespace {

int64_t state_bytes(const BeamSearchState* s) {
  if (!s) return 0;
  int64_t total = sizeof(BeamSearchState);
  for (const Beam& b : s->beams) total += sizeof(Beam) + static_cast<int64_t>(b.tokens.size()) * 8;
  for (const BeamHypothesis& h : s->finished)
    total += sizeof(BeamHypothesis) + static_cast<int64_t>(h.tokens.size()) * 8;
  return total;
}

// Estimated: the states are shared between consecutive steps, counted in each.
int64_t beam_step_bytes(const BeamStep& b) {
  int64_t total =
      sizeof(BeamStep) + static_cast<int64_t>(b.candidates.size()) * sizeof(BeamCandidate);
  total += state_bytes(b.before.get()) + state_bytes(b.after.get());
  for (const BeamHypothesis& h : b.final)
    total += sizeof(BeamHypothesis) + static_cast<int64_t>(h.tokens.size()) * 8;
  return total;
}

}  // namespace

int64_t StepTrace::memory_bytes() const {
  int64_t total = sizeof(StepTrace);
  for (const LaneStep& l : lanes) {
    total += sizeof(LaneStep);
    total += static_cast<int64_t>(l.logits.size() + l.residuals.size()) * 4;
    total += static_cast<int64_t>(l.input_tokens.size() + l.slots_written.size() +
                                  l.context_ids.size()) *
             4;
    for (const auto& a : l.attention)
      if (a) total += static_cast<int64_t>(a->size()) * 4;
    if (l.beam) total += beam_step_bytes(*l.beam);
    total += static_cast<int64_t>(l.hidden.size()) * 4;
    if (l.contrastive)
      total +=
          sizeof(ContrastiveStep) +
          static_cast<int64_t>(l.contrastive->candidates.size()) * sizeof(ContrastiveCandidate) +
          static_cast<int64_t>(l.contrastive->similarity.size()) * 4;
    if (l.spec) {
      total += sizeof(SpecRound) +
               static_cast<int64_t>(l.spec->drafts.size()) * sizeof(SpecDraftToken) +
               static_cast<int64_t>(l.spec->residual.size()) * 4;
      for (const auto& row : l.spec->draft_logits) total += static_cast<int64_t>(row.size()) * 4;
      for (const auto& row : l.spec->target_logits) total += static_cast<int64_t>(row.size()) * 4;
    }
    if (l.dola)
      total += sizeof(DolaStep) +
               static_cast<int64_t>(l.dola->contrast.size() + l.dola->divergence.size() +
                                    l.dola->candidate_layers.size()) *
                   4 +
               static_cast<int64_t>(l.dola->top.size()) * sizeof(DolaToken);
  }
  for (const auto& s : kv_after.sequences) total += static_cast<int64_t>(s.block_table.size()) * 4;
  total += static_cast<int64_t>(kv_after.ref_counts.size()) * 4;
  return total;
}

}  // namespace ts
