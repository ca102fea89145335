// Stepping through an imported session: the snapshot as of one history step.
#include <algorithm>
#include <string>

#include "session/session_import.h"

namespace ts {

SnapshotPtr replay_snapshot(const ImportedSession& session, int cursor, uint64_t version) {
  const SessionSnapshot& full = session.full;
  const int n = static_cast<int>(full.history.size());
  auto s = std::make_shared<SessionSnapshot>(full);
  s->version = version;
  s->busy = false;
  s->running = false;
  cursor = std::clamp(cursor, -1, n - 1);
  if (cursor == n - 1 && n > 0) {
    // The end of the recording is where a replay finishes, whatever the live
    // session was doing when it was saved: nothing more can be stepped.
    s->state = SessionState::kFinished;
    s->next_action = "the end of the recorded session (step " + std::to_string(n) + " of " +
                     std::to_string(n) + ")";
    return s;
  }
  if (cursor == n - 1) return s;
  s->history.resize(static_cast<size_t>(cursor + 1));
  if (cursor < 0) {
    // Before prefill: the prompt, the lanes' strategies, an empty cache.
    s->state = SessionState::kReady;
    s->lanes.clear();
    s->kv = KvOccupancy{};
    if (n > 0) {
      const KvOccupancy& k = full.history[0]->kv_after;
      s->kv.blocks_total = s->kv.blocks_free = k.blocks_total;
      s->kv.block_size = k.block_size;
      s->kv.bytes_per_layer_capacity = k.bytes_per_layer_capacity;
      s->kv.ref_counts.assign(k.ref_counts.size(), 0);
    }
    s->next_action = "prefill: " + std::to_string(full.prompt_tokens.size()) + " tokens";
    return s;
  }
  s->state = SessionState::kPaused;
  s->kv = full.history[cursor]->kv_after;
  // Lanes as of the cursor: those branched later do not exist yet; each
  // lane's tokens are its record's context and chosen token at its last
  // step so far; a lane that stopped later is still running.
  std::vector<Lane> lanes;
  for (const Lane& l : full.lanes) {
    // A branch exists from the step after it was made (first_step, the
    // history's length then); lanes are made in order, so the rest came later.
    if (l.first_step > cursor) break;
    Lane lane = l;
    int last = -1;
    for (int step = 0; step < n; ++step)
      if (const LaneStep* r = lane_record(full.history, full.lanes, step, l.id);
          r && r->lane == l.id)
        last = step;
    const LaneStep* rec = nullptr;
    for (int step = cursor; step >= 0 && !rec; --step)
      rec = lane_record(full.history, full.lanes, step, l.id);
    if (rec) {
      // A speculative round's context runs past its last committed token
      // (the drafts the verify pass fed): its choice's context stops there.
      const std::vector<int> context = choice_context(*rec);
      const size_t prompt = full.prompt_tokens.size();
      lane.generated.assign(context.begin() + static_cast<long>(std::min(prompt, context.size())),
                            context.end());
      if (rec->chosen_token >= 0) lane.generated.push_back(rec->chosen_token);
    }
    if (last > cursor) {
      lane.stop_reason.clear();
      lane.closed = false;
    }
    lanes.push_back(std::move(lane));
  }
  s->lanes = std::move(lanes);
  s->next_action = "replay: step " + std::to_string(cursor + 1) + " of " + std::to_string(n);
  return s;
}

}  // namespace ts
