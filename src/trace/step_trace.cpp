#include "trace/step_trace.h"

namespace ts {

const char* phase_name(Phase phase) { return phase == Phase::kPrefill ? "prefill" : "decode"; }

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
  }
  for (const auto& s : kv_after.sequences) total += static_cast<int64_t>(s.block_table.size()) * 4;
  total += static_cast<int64_t>(kv_after.ref_counts.size()) * 4;
  return total;
}

}  // namespace ts
