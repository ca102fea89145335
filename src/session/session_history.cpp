// Edits of a session's history: back (a whole step or one lane), branch at
// any step with any token, re-choose a lane with another strategy, replace a
// step, close a lane, reset.
#include "session/session.h"

#include <algorithm>

#include "sampling/sampling_pipeline.h"
#include "session/lookahead_lane.h"
#include "session/speculative_lane.h"
#include "util/error.h"

namespace ts {

void Session::back() {
  if (history_.empty()) throw Error("nothing to step back to");
  const StepTrace& last = *history_.back();
  if (last.phase == Phase::kPrefill) {
    release_lanes();
    return;
  }
  // Lanes branched after the last step are undone with it. They sit at the
  // end of lanes_: ids grow with first_step.
  const int remaining = static_cast<int>(history_.size()) - 1;
  std::vector<Lane> lanes = lanes_;
  std::vector<Lane> dropped;
  while (!lanes.empty() && lanes.back().first_step > remaining) {
    dropped.push_back(std::move(lanes.back()));
    lanes.pop_back();
  }
  // Undoing a beam record may compute (restoring pruned beams) and fail:
  // beams first, into new sequences, so that a failure changes nothing;
  // then the other lanes, which only truncate.
  const std::vector<Lane> before = lanes;
  std::vector<const LaneStep*> order;
  for (const LaneStep& ls : last.lanes) order.push_back(&ls);
  std::stable_partition(order.begin(), order.end(), [](const LaneStep* ls) { return ls->beam; });
  size_t undone = 0;
  try {
    for (; undone < order.size() && order[undone]->beam; ++undone)
      undo_record(lanes[order[undone]->lane], *order[undone]);
  } catch (...) {
    for (size_t i = 0; i < undone; ++i)
      release_unused_sequences(lanes[order[i]->lane], before[order[i]->lane]);
    throw;
  }
  for (; undone < order.size(); ++undone) undo_record(lanes[order[undone]->lane], *order[undone]);
  for (const LaneStep* ls : order) release_unused_sequences(before[ls->lane], lanes[ls->lane]);
  for (Lane& lane : dropped) release_lane_sequences(lane);
  lanes_ = std::move(lanes);
  trace_bytes_ -= last.memory_bytes();
  history_.pop_back();
}

void Session::release_unused_sequences(const Lane& from, const Lane& kept) {
  for (SeqId seq : from.beam_seqs)
    if (std::find(kept.beam_seqs.begin(), kept.beam_seqs.end(), seq) == kept.beam_seqs.end())
      engine_->cache().release(seq);
}

void Session::undo_record(Lane& lane, const LaneStep& record) {
  const bool cached = options_.kv_cache && !lane.closed;
  if (record.spec) {
    // A whole round: its tokens, its γ, and both caches back to its start.
    if (cached) undo_spec_caches(*engine_, *draft_engine_, lane, record);
    uncommit_spec_round(lane, record);
  } else if (record.lookahead) {
    // A whole pass: its tokens, the window and pool before it, the cache to x.
    if (cached && engine_->cache().length(lane.seq) > record.start_pos)
      engine_->cache().truncate(lane.seq, record.start_pos);
    uncommit_lookahead_step(lane, record);
  } else if (record.contrastive) {
    // The chosen token was cached by the winner's fork: cut it off; the
    // record becomes the one the lane chooses from again.
    if (cached) engine_->cache().truncate(lane.seq, record.context());
    if (lane.hidden)
      lane.hidden = std::make_shared<const std::vector<float>>(
          lane.hidden->begin(),
          lane.hidden->begin() + static_cast<long>(record.context()) * engine_->config().n_embd);
    lane.pending = std::make_shared<const LaneStep>(record);
    lane.generated.pop_back();
  } else if (!record.beam) {
    if (cached) engine_->cache().truncate(lane.seq, record.start_pos);
    lane.generated.pop_back();
  } else {
    const BeamSearchState& before = *record.beam->before;
    if (cached) {
      // Each earlier beam caches its tokens but the last. A beam with a kept
      // child is a truncated fork of it; a pruned one is rebuilt from the
      // longest shared prefix (only its own tail is computed again).
      std::vector<CachedSequence> sources;
      for (size_t b = 0; b < lane.beam_seqs.size(); ++b) {
        std::vector<int> tokens = prompt_ids();
        const std::vector<int>& own = lane.beams->beams[b].tokens;
        tokens.insert(tokens.end(), own.begin(), own.end() - 1);
        sources.push_back({lane.beam_seqs[b], std::move(tokens)});
      }
      std::vector<SeqId> seqs;
      try {
        for (const Beam& beam : before.beams) {
          std::vector<int> tokens = prompt_ids();
          tokens.insert(tokens.end(), beam.tokens.begin(), beam.tokens.end() - 1);
          seqs.push_back(sequence_for(tokens, sources));
          // Later beams fork this one on a tie, so that they share its blocks.
          sources.push_back({seqs.back(), std::move(tokens)});
        }
      } catch (...) {
        for (SeqId seq : seqs) engine_->cache().release(seq);
        throw;
      }
      lane.beam_seqs = std::move(seqs);
      lane.seq = lane.beam_seqs[0];
    }
    lane.beams = record.beam->before;
    lane.generated = before.beams[0].tokens;
  }
  if (!lane.closed) lane.stop_reason.clear();
}

SeqId Session::sequence_for(const std::vector<int>& tokens,
                            const std::vector<CachedSequence>& sources) {
  size_t best = 0, best_len = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::vector<int>& t = sources[i].tokens;
    const size_t len =
        std::mismatch(tokens.begin(), tokens.begin() + std::min(tokens.size(), t.size()), t.begin())
            .first -
        tokens.begin();
    if (len >= best_len) best = i, best_len = len;  // ties: the latest source
  }
  KvCacheManager& cache = engine_->cache();
  const SeqId seq = cache.fork(sources.at(best).seq);
  try {
    cache.truncate(seq, static_cast<int>(best_len));
    if (best_len < tokens.size())
      engine_->forward(
          {ForwardRequest{seq, std::vector<int>(tokens.begin() + best_len, tokens.end())}},
          ForwardOptions{});
  } catch (...) {
    cache.release(seq);
    throw;
  }
  return seq;
}

void Session::reset() {
  if (prompt_tokens_.empty()) return;
  release_lanes();
}

void Session::rechoose(int lane_id, const SamplingParams& params) {
  params.validate();
  if (history_.empty()) throw Error("nothing chosen yet: run prefill first");
  const Lane& current = lane_at(lane_id);
  if (current.beam_search() || params.beam_search())
    throw Error("rechoose: beam lanes choose by score, not by a draw (lane " +
                std::to_string(lane_id) + ")");
  if (current.contrastive() || params.contrastive())
    throw Error(
        "rechoose: contrastive lanes choose by score over a forward of their candidates "
        "(lane " +
        std::to_string(lane_id) + ")");
  if (current.speculative() || params.speculative())
    throw Error("rechoose: speculative lanes choose by verifying a round (lane " +
                std::to_string(lane_id) + ")");
  if (current.draft_free() || params.draft_free())
    throw Error("rechoose: lookahead and prompt-lookup lanes choose by verifying a pass (lane " +
                std::to_string(lane_id) + ")");
  if (current.closed) throw Error("rechoose: lane " + std::to_string(lane_id) + " is closed");
  auto trace = std::make_shared<StepTrace>(*history_.back());
  auto it = std::find_if(trace->lanes.begin(), trace->lanes.end(),
                         [&](const LaneStep& ls) { return ls.lane == lane_id; });
  if (it == trace->lanes.end())
    throw Error("lane " + std::to_string(lane_id) + " did not take part in the last step");
  Lane updated = current;
  updated.params = params;
  choose(*it, updated);
  updated.generated.back() = it->chosen_token;
  finish_lane_if_done(updated, *it);
  lanes_[lane_id] = std::move(updated);
  if (trace->phase == Phase::kPrefill) strategies_[lane_id] = params;
  replace_step(static_cast<int>(history_.size()) - 1, std::move(trace));
}

void Session::replace_step(int index, std::shared_ptr<StepTrace> trace) {
  trace_bytes_ -= history_[index]->memory_bytes();
  trace_bytes_ += trace->memory_bytes();
  history_[index] = std::move(trace);
}

const LaneStep* lane_record(const std::vector<StepTracePtr>& history,
                            const std::vector<Lane>& lanes, int step, int lane_id) {
  if (step < 0 || step >= static_cast<int>(history.size())) return nullptr;
  if (lane_id < 0 || lane_id >= static_cast<int>(lanes.size())) return nullptr;
  const Lane& lane = lanes[lane_id];
  if (step >= lane.first_step) {
    for (const LaneStep& ls : history[step]->lanes)
      if (ls.lane == lane_id) return &ls;
    return nullptr;
  }
  if (step == lane.branch_step) return lane.branch_record.get();
  if (step < lane.branch_step) return lane_record(history, lanes, step, lane.parent);
  return nullptr;
}

const LaneStep* Session::record(int step, int lane) const {
  return lane_record(history_, lanes_, step, lane);
}

int Session::branch(int step, int lane_id, int token) {
  if (history_.empty()) throw Error("branch: run prefill first");
  if (step < 0 || step >= static_cast<int>(history_.size()))
    throw Error("branch: no step " + std::to_string(step) + " (the history holds steps 0 to " +
                std::to_string(history_.size() - 1) + ")");
  const Lane& source = lane_at(lane_id);
  const std::string name = "lane " + std::to_string(lane_id);
  if (source.closed) throw Error("branch: " + name + " is closed");
  if (source.beam_search()) throw Error("branch: " + name + " uses beam search");
  if (source.contrastive()) throw Error("branch: " + name + " uses contrastive search");
  if (source.speculative())
    throw Error("branch: " + name + " uses speculative decoding (its steps are whole rounds)");
  if (source.draft_free())
    throw Error("branch: " + name + " uses " +
                (source.params.lookahead_on ? "lookahead" : "prompt lookup") +
                " decoding (its steps are whole passes)");
  if (token < 0 || token >= engine_->config().vocab_size)
    throw Error("branch: token " + std::to_string(token) + " is not in the vocabulary (0 to " +
                std::to_string(engine_->config().vocab_size - 1) + ")");
  if (open_lanes() >= kMaxLanes)
    throw Error("branch: already " + std::to_string(kMaxLanes) + " open lanes (close one first)");
  const LaneStep* from = record(step, lane_id);
  if (!from) throw Error("branch: " + name + " has no record at step " + std::to_string(step));

  Lane lane;
  lane.id = static_cast<int>(lanes_.size());
  lane.params = source.params;
  lane.generated.assign(from->context_ids.begin() + static_cast<long>(prompt_tokens_.size()),
                        from->context_ids.end());
  lane.generated.push_back(token);
  lane.parent = lane_id;
  lane.branch_step = step;
  lane.first_step = static_cast<int>(history_.size());
  auto rec = std::make_shared<LaneStep>(*from);
  rec->lane = lane.id;
  rec->chosen_token = token;
  rec->banned_words = banned_words_;
  rec->chosen_prob = sample_next(choice_logits(*rec), rec->context_ids, rec->params,
                                 rec->step_index, banned_words_.get())
                         .final_probs[token];
  rec->uniform = 0;
  finish_lane_if_done(lane, *rec);
  lane.branch_record = std::move(rec);
  if (options_.kv_cache) {
    // The step's inputs are cached already: a fork cut back to them.
    KvCacheManager& cache = engine_->cache();
    lane.seq = cache.fork(source.seq);
    cache.truncate(lane.seq, lane.branch_record->context());
  }
  lanes_.push_back(std::move(lane));
  return lanes_.back().id;
}

void Session::back_lane(int lane_id) {
  const Lane& lane = lane_at(lane_id);
  const std::string name = "lane " + std::to_string(lane_id);
  if (lane.closed) throw Error("back: " + name + " is closed");
  int step = static_cast<int>(history_.size()) - 1;
  for (; step >= lane.first_step; --step)
    if (std::any_of(history_[step]->lanes.begin(), history_[step]->lanes.end(),
                    [&](const LaneStep& ls) { return ls.lane == lane_id; }))
      break;
  if (step < lane.first_step)
    throw Error("back: " + name + " was just branched and has no step of its own (close it)");
  if (history_[step]->phase == Phase::kPrefill)
    throw Error("back: " + name + " holds only its first token (step the whole session back)");
  for (const Lane& other : lanes_)
    if (other.parent == lane_id && other.branch_step >= step)
      throw Error("back: lane " + std::to_string(other.id) + " was branched from " + name +
                  " at step " + std::to_string(other.branch_step));
  auto trace = std::make_shared<StepTrace>(*history_[step]);
  auto it = std::find_if(trace->lanes.begin(), trace->lanes.end(),
                         [&](const LaneStep& ls) { return ls.lane == lane_id; });
  Lane updated = lane;
  undo_record(updated, *it);
  release_unused_sequences(lane, updated);
  trace->lanes.erase(it);
  lanes_[lane_id] = std::move(updated);
  replace_step(step, std::move(trace));
}

void Session::close_lane(int lane_id) {
  const Lane& lane = lane_at(lane_id);
  if (lane.closed) throw Error("lane " + std::to_string(lane_id) + " is already closed");
  if (open_lanes() == 1)
    throw Error("lane " + std::to_string(lane_id) +
                " is the only open lane (reset to start again)");
  Lane& l = lanes_[lane_id];
  release_lane_sequences(l);
  l.closed = true;
  l.stop_reason = "closed";
}

}  // namespace ts
