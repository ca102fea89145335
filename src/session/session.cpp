#include "session/session.h"

#include <algorithm>

#include "sampling/distribution.h"
#include "sampling/sampling_pipeline.h"
#include "session/dola_lane.h"
#include "session/lookahead_lane.h"
#include "session/speculative_lane.h"
#include "util/error.h"

namespace ts {

Session::~Session() {
  try {
    release_lanes();
  } catch (...) {
  }
}

void Session::release_lane_sequences(Lane& lane) {
  KvCacheManager& cache = engine_->cache();
  std::vector<SeqId> seqs = lane.beam_seqs;
  if (seqs.empty()) seqs.push_back(lane.seq);
  for (SeqId seq : seqs)
    if (seq >= 0 && cache.contains(seq)) cache.release(seq);
  if (lane.draft_seq >= 0 && draft_engine_ && draft_engine_->cache().contains(lane.draft_seq))
    draft_engine_->cache().release(lane.draft_seq);
  lane.seq = -1;
  lane.draft_seq = -1;
  lane.beam_seqs.clear();
}

void Session::release_lanes() {
  for (Lane& lane : lanes_) release_lane_sequences(lane);
  lanes_.clear();
  history_.clear();
  trace_bytes_ = 0;
}

void Session::choose(LaneStep& ls, const Lane& lane) const {
  // A DoLa lane's processors and choice run on the contrast scores.
  ls.dola = lane.params.dola()
                ? dola_for_record(engine_->weights(), lane.params, ls.logits, ls.residuals)
                : nullptr;
  SamplingRecord rec = sample_next(choice_logits(ls), ls.context_ids, lane.params, ls.step_index,
                                   banned_words_.get());
  ls.params = lane.params;
  ls.banned_words = banned_words_;
  ls.chosen_token = rec.draw.chosen_token;
  ls.chosen_prob = rec.draw.chosen_prob;
  ls.uniform = rec.draw.uniform;
  ls.kept_tokens = rec.stages.back().kept;
}

void Session::finish_lane_if_done(Lane& lane, const LaneStep& ls) const {
  lane.stop_reason.clear();
  const int n_ctx = engine_->config().n_ctx;
  if (ls.chosen_token == tokenizer_->eot_id() && tokenizer_->eot_id() >= 0)
    lane.stop_reason = "end of text";
  else if (static_cast<int>(lane.generated.size()) >= options_.max_new_tokens)
    lane.stop_reason = "token limit (" + std::to_string(options_.max_new_tokens) + ")";
  else if (ls.context() + (lane.contrastive() ? 1 : 0) >= n_ctx)
    // A contrastive lane runs its next candidates one position further on:
    // it stops when they would not fit.
    lane.stop_reason = "context end: the model holds " + std::to_string(n_ctx) + " tokens";
}

StepTrace Session::make_trace(Phase phase, double seconds, const StepCost& cost,
                              int recomputed_tokens) const {
  StepTrace t;
  t.index = static_cast<int>(history_.size());
  t.phase = phase;
  t.seconds = seconds;
  t.cost = cost;
  t.backend = engine_->backend().name();
  t.kv_cache = options_.kv_cache;
  t.recomputed_tokens = recomputed_tokens;
  return t;
}

namespace {

// The cache sequences each open lane holds, for the step record: panels
// name a sequence after its lane and beam, at any step and in a replay.
std::vector<KvSequenceOwner> sequence_owners(const std::vector<Lane>& lanes) {
  std::vector<KvSequenceOwner> owners;
  for (const Lane& lane : lanes) {
    if (lane.closed) continue;
    if (!lane.beam_seqs.empty()) {
      for (size_t b = 0; b < lane.beam_seqs.size(); ++b)
        owners.push_back({lane.beam_seqs[b], lane.id, static_cast<int>(b)});
    } else if (lane.seq >= 0) {
      owners.push_back({lane.seq, lane.id, -1});
    }
  }
  return owners;
}

ForwardOptions forward_options(const SessionOptions& o, bool hidden = false) {
  ForwardOptions f;
  f.record_attention = o.record_attention;
  f.record_residuals = o.record_residuals;
  f.record_hidden = hidden;
  return f;
}

// Keeps only the rows [first_row, rows) of each recorded layer. Every row
// kept is moved, not copied: a long prompt's attention must not exist twice.
std::vector<std::shared_ptr<const std::vector<float>>> attention_rows(
    std::vector<std::vector<float>>& attention, int n_head, int rows, int context, int first_row) {
  std::vector<std::shared_ptr<const std::vector<float>>> out(attention.size());
  for (size_t l = 0; l < attention.size(); ++l) {
    if (attention[l].empty()) continue;
    if (first_row == 0) {
      out[l] = std::make_shared<const std::vector<float>>(std::move(attention[l]));
      continue;
    }
    auto kept = std::make_shared<std::vector<float>>();
    const int keep = rows - first_row;
    kept->reserve(static_cast<size_t>(n_head) * keep * context);
    for (int h = 0; h < n_head; ++h) {
      const auto begin = attention[l].begin() +
                         (static_cast<long>(h) * rows + first_row) * static_cast<long>(context);
      kept->insert(kept->end(), begin, begin + static_cast<long>(keep) * context);
    }
    out[l] = std::move(kept);
  }
  return out;
}

double raw_entropy(const std::vector<float>& logits) { return entropy_nats(softmax(logits)); }

}  // namespace

const StepTrace& Session::prefill() {
  if (state() == SessionState::kNoPrompt) throw Error("prefill: enter a prompt first");
  if (!history_.empty()) throw Error("prefill already done: press Reset to start again");
  const std::vector<int> ids = prompt_ids();
  const bool contrastive = std::any_of(strategies_.begin(), strategies_.end(),
                                       [](const SamplingParams& p) { return p.contrastive(); });
  const int n_ctx = engine_->config().n_ctx;
  if (contrastive && static_cast<int>(ids.size()) >= n_ctx)
    throw Error(
        "contrastive search runs its candidates one position past the prompt, and the "
        "prompt fills the model's context of " +
        std::to_string(n_ctx) + " tokens");
  const bool speculative = std::any_of(strategies_.begin(), strategies_.end(),
                                       [](const SamplingParams& p) { return p.speculative(); });
  if (speculative && !draft_engine_)
    throw Error(
        "speculative decoding needs a draft model (--draft-model DIR: any model sharing the "
        "target's vocabulary, the target's own directory included)");
  if (speculative && !options_.kv_cache)
    throw Error("speculative decoding needs the KV cache (it verifies over the cached prefix)");
  if (!options_.kv_cache && std::any_of(strategies_.begin(), strategies_.end(),
                                        [](const SamplingParams& p) { return p.draft_free(); }))
    throw Error(
        "lookahead and prompt lookup need the KV cache (a pass keeps only its accepted rows)");
  ForwardResult result;
  std::vector<Lane> lanes(strategies_.size());
  KvCacheManager& cache = engine_->cache();
  SeqId base = -1;
  SeqId draft_base = -1;
  if (options_.kv_cache) {
    base = cache.create();
    try {
      result =
          engine_->forward({ForwardRequest{base, ids}}, prefill_options(ids.size(), contrastive));
    } catch (...) {
      cache.release(base);
      throw;
    }
  } else {
    result = engine_->forward_scratch(ids, prefill_options(ids.size(), contrastive));
  }
  auto trace = std::make_shared<StepTrace>(
      make_trace(Phase::kPrefill, result.seconds, result.cost, static_cast<int>(ids.size())));
  EntryOutput& out = result.outputs[0];
  // One entry per layer, recorded or not (none may fit the budget).
  if (options_.record_attention) out.attention.resize(engine_->config().n_layer);
  try {
    // The draft prefills its own cache with the prompt (when it fits the
    // draft's context; otherwise its lanes never draft). Its time and cost
    // are part of the prefill step's.
    if (speculative && static_cast<int>(ids.size()) <= draft_engine_->config().n_ctx) {
      draft_base = draft_engine_->cache().create();
      ForwardResult d = draft_engine_->forward({ForwardRequest{draft_base, ids}}, ForwardOptions{});
      trace->seconds += d.seconds;
      trace->cost += d.cost;
      trace->recomputed_tokens += static_cast<int>(ids.size());
    }
    for (size_t i = 0; i < lanes.size(); ++i) {
      Lane& lane = lanes[i];
      lane.id = static_cast<int>(i);
      lane.params = strategies_[i];
      LaneStep ls;
      ls.lane = lane.id;
      ls.input_tokens = ids;
      ls.start_pos = 0;
      if (options_.kv_cache) ls.slots_written = result.plans[0].slots;
      ls.context_ids = ids;
      ls.logits = out.logits;
      ls.entropy = raw_entropy(ls.logits);
      ls.residuals = out.residuals;
      if (i == 0)  // every lane shares lane 0's prefill: its attention is stored once
        ls.attention =
            attention_rows(out.attention, engine_->config().n_head, ls.rows(), ls.context(), 0);
      ls.step_index = 0;
      // Every lane's sequence is a fork of the prompt's: its blocks are shared.
      if (lane.params.beam_search()) {
        lane.beams = std::make_shared<const BeamSearchState>(beam_search_start());
        if (options_.kv_cache) lane.beam_seqs = {cache.fork(base)};
        ls = advance_beams(lane, {std::move(ls)});
        commit_beams(lane, ls);
      } else if (lane.contrastive()) {
        // Chosen below, once every contrastive lane's candidates have run.
        if (options_.kv_cache) lane.seq = cache.fork(base);
        lane.hidden = std::make_shared<const std::vector<float>>(out.hidden);
      } else {
        if (options_.kv_cache) lane.seq = cache.fork(base);
        if (lane.speculative()) {
          lane.spec_gamma = initial_spec_gamma(lane.params);
          if (draft_base >= 0) lane.draft_seq = draft_engine_->cache().fork(draft_base);
        }
        if (lane.params.lookahead_on)
          lane.lookahead_state = initial_lookahead_state(lane.params.lookahead, ids);
        choose(ls, lane);
        lane.generated.push_back(ls.chosen_token);
        finish_lane_if_done(lane, ls);
      }
      trace->lanes.push_back(std::move(ls));
    }
    if (contrastive) choose_first_contrastive(lanes, trace->lanes, *trace);
  } catch (...) {
    for (Lane& l : lanes) release_lane_sequences(l);
    if (base >= 0) cache.release(base);
    if (draft_base >= 0) draft_engine_->cache().release(draft_base);
    throw;
  }
  if (base >= 0) cache.release(base);
  if (draft_base >= 0) draft_engine_->cache().release(draft_base);
  lanes_ = std::move(lanes);
  trace->kv_after = cache.occupancy();
  trace->kv_owners = sequence_owners(lanes_);
  publish(std::move(trace));
  return *history_.back();
}

const StepTrace& Session::step() {
  const SessionState s = state();
  if (s == SessionState::kReady) return prefill();
  if (s == SessionState::kNoPrompt) throw Error("step: enter a prompt first");
  if (s == SessionState::kFinished) throw Error("cannot step: " + next_action());

  std::vector<DecodeRequest> requests = gather_requests();
  std::vector<LaneStep> spec_records = run_spec_rounds();
  try {
    fork_candidates(requests, lanes_);
  } catch (...) {
    undo_spec_rounds(spec_records);
    throw;
  }
  std::vector<LaneStep> records;
  StepTrace trace;
  try {
    // Speculative lanes ran their own passes: the rest share one forward.
    trace = requests.empty() ? make_trace(Phase::kDecode, 0, StepCost{}, 0)
                             : forward_requests(requests, records);
  } catch (...) {
    release_candidate_forks(requests, lanes_);
    undo_spec_rounds(spec_records);
    throw;
  }
  std::vector<LaneStep> chosen;
  std::vector<ContrastiveOutcome> outcomes;
  try {
    chosen = choose_tokens(requests, std::move(records), outcomes);
    chosen.reserve(chosen.size() + spec_records.size());
  } catch (...) {
    undo_spec_rounds(spec_records);
    // Choosing cannot fail for validated parameters, but if it does the
    // cache is rolled back so the session stays where it was.
    if (options_.kv_cache)
      for (const DecodeRequest& r : requests)
        if (r.candidate < 0)
          engine_->cache().truncate(r.seq, static_cast<int>(r.context.size()) - 1);
    release_candidate_forks(requests, lanes_);
    throw;
  }
  // The rounds' passes are part of the step's time and cost; records stay
  // in lane order (one per lane).
  for (LaneStep& ls : spec_records) {
    if (ls.spec) {
      trace.seconds += ls.spec->draft_seconds + ls.spec->verify_seconds;
      trace.cost += ls.spec->draft_cost;
      trace.cost += ls.spec->verify_cost;
      trace.recomputed_tokens += ls.rows() + ls.spec->draft_tokens_fed;
    } else {
      trace.seconds += ls.lookahead->seconds;
      trace.cost += ls.lookahead->cost;
      trace.recomputed_tokens += ls.rows();
    }
    chosen.push_back(std::move(ls));
  }
  std::sort(chosen.begin(), chosen.end(),
            [](const LaneStep& a, const LaneStep& b) { return a.lane < b.lane; });
  commit(std::move(trace), std::move(chosen), outcomes);
  return *history_.back();
}

std::vector<LaneStep> Session::run_spec_rounds() {
  std::vector<LaneStep> records;
  const LookaheadLaneContext lctx{*engine_, banned_words_, tokenizer_->eot_id(),
                                  options_.max_new_tokens, options_.record_attention};
  try {
    for (const Lane& lane : lanes_) {
      if (!lane.running()) continue;
      if (lane.speculative() && draft_engine_) {
        const SpecRoundContext ctx{*engine_,
                                   *draft_engine_,
                                   banned_words_,
                                   options_.max_new_tokens,
                                   tokenizer_->eot_id(),
                                   options_.record_attention};
        records.push_back(run_spec_round(ctx, lane, lane_tokens(lane.id)));
      } else if (lane.draft_free()) {
        records.push_back(run_lookahead_step(lctx, lane, lane_tokens(lane.id)));
      }
    }
  } catch (...) {
    undo_spec_rounds(records);
    throw;
  }
  return records;
}

void Session::undo_spec_rounds(const std::vector<LaneStep>& records) {
  for (const LaneStep& ls : records) {
    if (ls.spec) undo_spec_caches(*engine_, *draft_engine_, lanes_[ls.lane], ls);
    if (ls.lookahead && engine_->cache().length(lanes_[ls.lane].seq) > ls.start_pos)
      engine_->cache().truncate(lanes_[ls.lane].seq, ls.start_pos);
  }
}

std::vector<Session::DecodeRequest> Session::gather_requests() const {
  std::vector<DecodeRequest> requests;
  for (const Lane& lane : lanes_) {
    if (!lane.running() || lane.speculative() || lane.draft_free()) continue;
    if (lane.contrastive()) {
      std::vector<DecodeRequest> candidates = candidate_requests(lane, *lane.pending);
      requests.insert(requests.end(), std::make_move_iterator(candidates.begin()),
                      std::make_move_iterator(candidates.end()));
      continue;
    }
    if (!lane.beam_search()) {
      requests.push_back(
          {lane.id, lane.seq, lane_tokens(lane.id), static_cast<int>(lane.generated.size())});
      continue;
    }
    for (size_t b = 0; b < lane.beams->beams.size(); ++b) {
      std::vector<int> context = prompt_ids();
      const std::vector<int>& tokens = lane.beams->beams[b].tokens;
      context.insert(context.end(), tokens.begin(), tokens.end());
      requests.push_back({lane.id, options_.kv_cache ? lane.beam_seqs[b] : -1, std::move(context),
                          lane.beams->steps});
    }
  }
  return requests;
}

StepTrace Session::forward_requests(const std::vector<DecodeRequest>& requests,
                                    std::vector<LaneStep>& records) {
  const bool hidden = std::any_of(requests.begin(), requests.end(),
                                  [](const DecodeRequest& r) { return r.candidate >= 0; });
  ForwardOptions fopts = forward_options(options_, hidden);
  // DoLa lanes read their premature layers off the residual stream.
  if (std::any_of(lanes_.begin(), lanes_.end(), [](const Lane& l) { return l.params.dola(); }))
    fopts.record_residuals = true;
  std::vector<EntryOutput> outputs;
  std::vector<AppendPlan> plans;
  double seconds = 0;
  StepCost cost;
  int recomputed = 0;
  if (options_.kv_cache) {
    // One batched forward: each sequence feeds its newest token.
    std::vector<ForwardRequest> batch;
    for (const DecodeRequest& r : requests) batch.push_back({r.seq, {r.context.back()}});
    ForwardResult result = engine_->forward(batch, fopts);
    seconds = result.seconds;
    cost = result.cost;
    recomputed = static_cast<int>(requests.size());
    outputs = std::move(result.outputs);
    plans = std::move(result.plans);
  } else {
    // The naive loop: each whole sequence goes through the model again.
    for (const DecodeRequest& r : requests) {
      ForwardResult result = engine_->forward_uncached(r.context, fopts);
      seconds += result.seconds;
      cost += result.cost;
      recomputed += static_cast<int>(r.context.size());
      outputs.push_back(std::move(result.outputs[0]));
    }
  }
  records.assign(requests.size(), LaneStep{});
  for (size_t i = 0; i < requests.size(); ++i) {
    LaneStep& ls = records[i];
    ls.lane = requests[i].lane;
    ls.context_ids = requests[i].context;
    ls.input_tokens = {ls.context_ids.back()};
    ls.start_pos = static_cast<int>(ls.context_ids.size()) - 1;
    ls.step_index = requests[i].step_index;
    if (!plans.empty()) {
      ls.slots_written = plans[i].slots;
      ls.blocks_copied = static_cast<int>(plans[i].copies.size());
    }
    ls.logits = std::move(outputs[i].logits);
    ls.residuals = std::move(outputs[i].residuals);
    if (requests[i].candidate >= 0) ls.hidden = std::move(outputs[i].hidden);
    ls.attention =
        attention_rows(outputs[i].attention, engine_->config().n_head, 1, ls.context(), 0);
    ls.entropy = raw_entropy(ls.logits);
  }
  return make_trace(Phase::kDecode, seconds, cost, recomputed);
}

std::vector<LaneStep> Session::choose_tokens(const std::vector<DecodeRequest>& requests,
                                             std::vector<LaneStep> records,
                                             std::vector<ContrastiveOutcome>& outcomes) const {
  std::vector<LaneStep> lane_records;
  for (size_t i = 0; i < requests.size();) {
    const Lane& lane = lanes_[requests[i].lane];
    if (lane.contrastive()) {
      std::vector<LaneStep> group;
      std::vector<SeqId> seqs;
      for (; i < requests.size() && requests[i].lane == lane.id; ++i) {
        group.push_back(std::move(records[i]));
        seqs.push_back(requests[i].seq);
      }
      ContrastiveOutcome outcome;
      lane_records.push_back(
          choose_contrastive(lane, *lane.pending, std::move(group), seqs, outcome));
      outcomes.push_back(std::move(outcome));
      continue;
    }
    if (!lane.beam_search()) {
      choose(records[i], lane);
      lane_records.push_back(std::move(records[i++]));
      continue;
    }
    std::vector<LaneStep> per_beam;
    for (; i < requests.size() && requests[i].lane == lane.id; ++i)
      per_beam.push_back(std::move(records[i]));
    lane_records.push_back(advance_beams(lane, std::move(per_beam)));
  }
  return lane_records;
}

void Session::commit(StepTrace trace, std::vector<LaneStep> lane_records,
                     const std::vector<ContrastiveOutcome>& outcomes) {
  size_t outcome = 0;
  for (LaneStep& ls : lane_records) {
    Lane& lane = lanes_[ls.lane];
    if (ls.beam) {
      commit_beams(lane, ls);
    } else if (ls.spec) {
      commit_spec_round(lane, ls);
      lane.stop_reason =
          spec_stop_reason(lane, ls, static_cast<int>(prompt_tokens_.size()),
                           options_.max_new_tokens, engine_->config().n_ctx, tokenizer_->eot_id());
    } else if (ls.lookahead) {
      commit_lookahead_step(lane, ls);
      lane.stop_reason =
          spec_stop_reason(lane, ls, static_cast<int>(prompt_tokens_.size()),
                           options_.max_new_tokens, engine_->config().n_ctx, tokenizer_->eot_id());
    } else if (ls.contrastive) {
      commit_contrastive(lane, ls, outcomes[outcome++]);
    } else {
      lane.generated.push_back(ls.chosen_token);
      finish_lane_if_done(lane, ls);
    }
    trace.lanes.push_back(std::move(ls));
  }
  trace.kv_after = engine_->cache().occupancy();
  trace.kv_owners = sequence_owners(lanes_);
  publish(std::make_shared<StepTrace>(std::move(trace)));
}

ForwardOptions Session::prefill_options(size_t tokens, bool hidden) const {
  ForwardOptions f = forward_options(options_, hidden);
  // DoLa lanes read their premature layers off the residual stream.
  if (std::any_of(strategies_.begin(), strategies_.end(),
                  [](const SamplingParams& p) { return p.dola(); }))
    f.record_residuals = true;
  if (!f.record_attention) return f;
  // A prompt's attention is n_layer x n_head x n^2 floats. Only the layers
  // the trace budget can keep are recorded (apply_budget drops the others
  // from the last layer down, and their attention is recomputed on demand):
  // a long prompt's full attention would otherwise be held for the step,
  // far beyond the budget (534 MB at 963 tokens on GPT-2 124M).
  const ModelConfig& cfg = engine_->config();
  const int64_t per_layer = int64_t{cfg.n_head} * int64_t(tokens) * int64_t(tokens) * 4;
  const int64_t room = options_.trace_budget_bytes - trace_bytes_;
  f.attention_layers.assign(cfg.n_layer, false);
  for (int l = 0; l < cfg.n_layer && (l + 1) * per_layer <= room; ++l) f.attention_layers[l] = true;
  return f;
}

void Session::apply_budget(StepTrace& trace) {
  int64_t bytes = trace.memory_bytes();
  // Attention is what grows fastest; keep whole layers while they fit and
  // leave the rest to be recomputed on demand.
  for (LaneStep& ls : trace.lanes) {
    for (int l = static_cast<int>(ls.attention.size()) - 1; l >= 0; --l) {
      if (trace_bytes_ + bytes <= options_.trace_budget_bytes) break;
      if (!ls.attention[l]) continue;
      bytes -= static_cast<int64_t>(ls.attention[l]->size()) * 4;
      ls.attention[l].reset();
    }
  }
}

void Session::publish(std::shared_ptr<StepTrace> trace) {
  apply_budget(*trace);
  trace_bytes_ += trace->memory_bytes();
  history_.push_back(std::move(trace));
}

int Session::run(int max_steps, const std::function<bool()>& should_stop) {
  int taken = 0;
  while (taken < max_steps && can_step()) {
    if (should_stop && should_stop()) break;
    step();
    ++taken;
  }
  return taken;
}

std::vector<float> Session::attention(int step, int lane, int layer) {
  if (step < 0 || step >= static_cast<int>(history_.size()))
    throw Error("no step " + std::to_string(step));
  if (layer < 0 || layer >= engine_->config().n_layer)
    throw Error("no layer " + std::to_string(layer));
  // In prefill every lane shares lane 0's forward pass.
  const LaneStep* it =
      history_[step]->phase == Phase::kPrefill ? record(step, 0) : record(step, lane);
  if (!it)
    throw Error("lane " + std::to_string(lane) + " has no record at step " + std::to_string(step));
  if (layer < static_cast<int>(it->attention.size()) && it->attention[layer])
    return *it->attention[layer];
  // Recompute: run the step's whole context through a scratch sequence and
  // keep this layer's rows for the step's own tokens.
  ForwardOptions f;
  f.record_attention = true;
  f.attention_layers.assign(engine_->config().n_layer, false);
  f.attention_layers[layer] = true;
  ForwardResult r = engine_->forward_scratch(it->context_ids, f);
  auto rows = attention_rows(r.outputs[0].attention, engine_->config().n_head, it->context(),
                             it->context(), it->start_pos);
  return *rows[layer];
}

}  // namespace ts
