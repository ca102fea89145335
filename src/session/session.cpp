#include "session/session.h"

#include <algorithm>
#include <cmath>

#include "sampling/distribution.h"
#include "sampling/sampling_pipeline.h"
#include "util/error.h"

namespace ts {

const char* state_name(SessionState state) {
  switch (state) {
    case SessionState::kNoPrompt:
      return "no prompt";
    case SessionState::kReady:
      return "ready for prefill";
    case SessionState::kPaused:
      return "paused";
    case SessionState::kFinished:
      return "finished";
  }
  return "?";
}

Session::Session(std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<Engine> engine,
                 SessionOptions options)
    : tokenizer_(std::move(tokenizer)), engine_(std::move(engine)), options_(options) {
  if (!tokenizer_ || !engine_) throw Error("session: tokenizer and engine are required");
  if (tokenizer_->vocab_size() != engine_->config().vocab_size)
    throw Error("tokenizer has " + std::to_string(tokenizer_->vocab_size()) +
                " tokens but the model's vocab_size is " +
                std::to_string(engine_->config().vocab_size));
  set_max_new_tokens(options_.max_new_tokens);
}

Session::~Session() {
  try {
    release_lanes();
  } catch (...) {
  }
}

void Session::release_lanes() {
  for (Lane& lane : lanes_) {
    if (lane.seq >= 0 && engine_->cache().contains(lane.seq)) engine_->cache().release(lane.seq);
    lane.seq = -1;
  }
  lanes_.clear();
  history_.clear();
  trace_bytes_ = 0;
}

void Session::set_prompt(std::string_view text) {
  if (text.empty()) throw Error("prompt is empty");
  std::vector<TokenSpan> tokens = tokenizer_->encode(text);
  if (tokens.empty()) throw Error("prompt is empty");
  const int n_ctx = engine_->config().n_ctx;
  if (static_cast<int>(tokens.size()) > n_ctx)
    throw Error("prompt has " + std::to_string(tokens.size()) +
                " tokens; the model's context holds " + std::to_string(n_ctx));
  release_lanes();
  prompt_text_ = std::string(text);
  prompt_tokens_ = std::move(tokens);
}

void Session::set_strategies(const std::vector<SamplingParams>& strategies) {
  if (strategies.empty() || static_cast<int>(strategies.size()) > kMaxLanes)
    throw Error("lanes: between 1 and " + std::to_string(kMaxLanes) + " strategies");
  for (const SamplingParams& p : strategies) p.validate();
  if (!history_.empty()) throw Error("lanes can change only before prefill (press Reset first)");
  strategies_ = strategies;
}

void Session::set_max_new_tokens(int n) {
  if (n <= 0) throw Error("max new tokens must be positive");
  options_.max_new_tokens = n;
}

void Session::set_kv_cache(bool enabled) {
  if (!history_.empty()) throw Error("the KV cache can be switched only before prefill");
  options_.kv_cache = enabled;
}

std::vector<int> Session::prompt_ids() const {
  std::vector<int> ids;
  ids.reserve(prompt_tokens_.size());
  for (const TokenSpan& t : prompt_tokens_) ids.push_back(t.id);
  return ids;
}

std::vector<int> Session::lane_tokens(int lane) const {
  if (lane < 0 || lane >= static_cast<int>(lanes_.size()))
    throw Error("no lane " + std::to_string(lane));
  std::vector<int> ids = prompt_ids();
  ids.insert(ids.end(), lanes_[lane].generated.begin(), lanes_[lane].generated.end());
  return ids;
}

SessionState Session::state() const {
  if (prompt_tokens_.empty()) return SessionState::kNoPrompt;
  if (history_.empty()) return SessionState::kReady;
  for (const Lane& lane : lanes_)
    if (lane.running()) return SessionState::kPaused;
  return SessionState::kFinished;
}

bool Session::can_step() const {
  const SessionState s = state();
  return s == SessionState::kReady || s == SessionState::kPaused;
}

std::string Session::next_action() const {
  switch (state()) {
    case SessionState::kNoPrompt:
      return "enter a prompt";
    case SessionState::kReady:
      return "prefill: " + std::to_string(prompt_tokens_.size()) + " tokens in one pass";
    case SessionState::kFinished: {
      std::string reasons;
      for (const Lane& lane : lanes_) {
        if (!reasons.empty()) reasons += "; ";
        if (lanes_.size() > 1) reasons += "lane " + std::to_string(lane.id) + ": ";
        reasons += lane.stop_reason;
      }
      return "finished: " + reasons;
    }
    case SessionState::kPaused:
      break;
  }
  int running = 0, cached = 0;
  for (const Lane& lane : lanes_) {
    if (!lane.running()) continue;
    ++running;
    cached = std::max(cached, static_cast<int>(prompt_tokens_.size() + lane.generated.size()) - 1);
  }
  const std::string step = "decode step " + std::to_string(history_.size());
  if (!options_.kv_cache)
    return step + ": KV cache off, recomputes all " + std::to_string(cached + 1) + " tokens" +
           (running > 1 ? " of each of " + std::to_string(running) + " lanes" : "");
  if (running > 1)
    return step + ": 1 token for each of " + std::to_string(running) + " lanes, reads up to " +
           std::to_string(cached) + " cached positions";
  return step + ": 1 token, reads " + std::to_string(cached) + " cached positions";
}

void Session::choose(LaneStep& ls, const Lane& lane) const {
  SamplingRecord rec = sample_next(ls.logits, ls.context_ids, lane.params, ls.step_index);
  ls.params = lane.params;
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
  else if (ls.context() >= n_ctx)
    lane.stop_reason = "context end: the model holds " + std::to_string(n_ctx) + " tokens";
}

StepTrace Session::make_trace(Phase phase, const ForwardResult& result) const {
  StepTrace t;
  t.index = static_cast<int>(history_.size());
  t.phase = phase;
  t.seconds = result.seconds;
  t.cost = result.cost;
  t.backend = engine_->backend().name();
  t.kv_cache = options_.kv_cache;
  return t;
}

namespace {

ForwardOptions forward_options(const SessionOptions& o) {
  ForwardOptions f;
  f.record_attention = o.record_attention;
  f.record_residuals = o.record_residuals;
  return f;
}

// Keeps only the rows [first_row, rows) of each recorded layer.
std::vector<std::shared_ptr<const std::vector<float>>> attention_rows(
    const std::vector<std::vector<float>>& attention, int n_head, int rows, int context,
    int first_row) {
  std::vector<std::shared_ptr<const std::vector<float>>> out(attention.size());
  for (size_t l = 0; l < attention.size(); ++l) {
    if (attention[l].empty()) continue;
    if (first_row == 0) {
      out[l] = std::make_shared<const std::vector<float>>(attention[l]);
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
  ForwardResult result;
  std::vector<Lane> lanes(strategies_.size());
  KvCacheManager& cache = engine_->cache();
  if (options_.kv_cache) {
    // Reserve every lane's fork before computing, so a full cache refuses
    // the step without side effects.
    const SeqId base = cache.create();
    try {
      result = engine_->forward({ForwardRequest{base, ids}}, forward_options(options_));
      lanes[0].seq = base;
      for (size_t i = 1; i < lanes.size(); ++i) lanes[i].seq = cache.fork(base);
    } catch (...) {
      for (const Lane& l : lanes)
        if (l.seq >= 0 && l.seq != base) cache.release(l.seq);
      cache.release(base);
      throw;
    }
  } else {
    result = engine_->forward_scratch(ids, forward_options(options_));
  }
  auto trace = std::make_shared<StepTrace>(make_trace(Phase::kPrefill, result));
  trace->recomputed_tokens = static_cast<int>(ids.size());
  const EntryOutput& out = result.outputs[0];
  for (size_t i = 0; i < lanes.size(); ++i) {
    lanes[i].id = static_cast<int>(i);
    lanes[i].params = strategies_[i];
    LaneStep ls;
    ls.lane = static_cast<int>(i);
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
    try {
      choose(ls, lanes[i]);
    } catch (...) {
      for (const Lane& l : lanes)
        if (l.seq >= 0) cache.release(l.seq);
      throw;
    }
    lanes[i].generated.push_back(ls.chosen_token);
    finish_lane_if_done(lanes[i], ls);
    trace->lanes.push_back(std::move(ls));
  }
  lanes_ = std::move(lanes);
  trace->kv_after = cache.occupancy();
  publish(std::move(trace));
  return *history_.back();
}

const StepTrace& Session::step() {
  const SessionState s = state();
  if (s == SessionState::kReady) return prefill();
  if (s == SessionState::kNoPrompt) throw Error("step: enter a prompt first");
  if (s == SessionState::kFinished) throw Error("cannot step: " + next_action());

  std::vector<int> running;
  for (const Lane& lane : lanes_)
    if (lane.running()) running.push_back(lane.id);
  const int decode_index = static_cast<int>(history_.size());
  const ForwardOptions fopts = forward_options(options_);
  const int n_head = engine_->config().n_head;

  std::vector<LaneStep> steps(running.size());
  ForwardResult batched;
  double seconds = 0;
  StepCost cost;
  int recomputed = 0;
  if (options_.kv_cache) {
    std::vector<ForwardRequest> requests;
    for (int id : running) requests.push_back({lanes_[id].seq, {lanes_[id].generated.back()}});
    batched = engine_->forward(requests, fopts);
    seconds = batched.seconds;
    cost = batched.cost;
    recomputed = static_cast<int>(running.size());
  }
  for (size_t i = 0; i < running.size(); ++i) {
    const Lane& lane = lanes_[running[i]];
    LaneStep& ls = steps[i];
    ls.lane = lane.id;
    ls.context_ids = lane_tokens(lane.id);
    ls.input_tokens = {lane.generated.back()};
    ls.start_pos = static_cast<int>(ls.context_ids.size()) - 1;
    ls.step_index = static_cast<int>(lane.generated.size());
    if (options_.kv_cache) {
      const EntryOutput& out = batched.outputs[i];
      ls.slots_written = batched.plans[i].slots;
      ls.blocks_copied = static_cast<int>(batched.plans[i].copies.size());
      ls.logits = out.logits;
      ls.residuals = out.residuals;
      ls.attention = attention_rows(out.attention, n_head, 1, ls.context(), 0);
    } else {
      // The naive loop: the whole sequence goes through the model again.
      ForwardResult r = engine_->forward_scratch(ls.context_ids, fopts);
      seconds += r.seconds;
      cost.flops += r.cost.flops;
      cost.weight_bytes += r.cost.weight_bytes;
      cost.kv_read_bytes += r.cost.kv_read_bytes;
      cost.kv_write_bytes += r.cost.kv_write_bytes;
      recomputed += static_cast<int>(ls.context_ids.size());
      ls.logits = r.outputs[0].logits;
      ls.residuals = r.outputs[0].residuals;
      ls.attention =
          attention_rows(r.outputs[0].attention, n_head, ls.context(), ls.context(), ls.start_pos);
    }
    ls.entropy = raw_entropy(ls.logits);
  }
  // Choosing cannot fail for validated parameters, but if it does the cache
  // is rolled back so the session stays where it was.
  try {
    for (size_t i = 0; i < running.size(); ++i) choose(steps[i], lanes_[running[i]]);
  } catch (...) {
    if (options_.kv_cache)
      for (size_t i = 0; i < running.size(); ++i)
        engine_->cache().truncate(lanes_[running[i]].seq, steps[i].start_pos);
    throw;
  }
  StepTrace t;
  t.index = decode_index;
  t.phase = Phase::kDecode;
  t.seconds = seconds;
  t.cost = cost;
  t.backend = engine_->backend().name();
  t.kv_cache = options_.kv_cache;
  t.recomputed_tokens = recomputed;
  for (size_t i = 0; i < running.size(); ++i) {
    Lane& lane = lanes_[running[i]];
    lane.generated.push_back(steps[i].chosen_token);
    finish_lane_if_done(lane, steps[i]);
    t.lanes.push_back(std::move(steps[i]));
  }
  t.kv_after = engine_->cache().occupancy();
  publish(std::make_shared<StepTrace>(std::move(t)));
  return *history_.back();
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

void Session::back() {
  if (history_.empty()) throw Error("nothing to step back to");
  const StepTrace& last = *history_.back();
  if (last.phase == Phase::kPrefill) {
    release_lanes();
    return;
  }
  for (const LaneStep& ls : last.lanes) {
    Lane& lane = lanes_[ls.lane];
    if (options_.kv_cache) engine_->cache().truncate(lane.seq, ls.start_pos);
    lane.generated.pop_back();
    lane.stop_reason.clear();
  }
  trace_bytes_ -= last.memory_bytes();
  history_.pop_back();
}

void Session::reset() {
  if (prompt_tokens_.empty()) return;
  release_lanes();
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

void Session::rechoose(int lane_id, const SamplingParams& params) {
  params.validate();
  if (history_.empty()) throw Error("nothing chosen yet: run prefill first");
  if (lane_id < 0 || lane_id >= static_cast<int>(lanes_.size()))
    throw Error("no lane " + std::to_string(lane_id));
  auto trace = std::make_shared<StepTrace>(*history_.back());
  auto it = std::find_if(trace->lanes.begin(), trace->lanes.end(),
                         [&](const LaneStep& ls) { return ls.lane == lane_id; });
  if (it == trace->lanes.end())
    throw Error("lane " + std::to_string(lane_id) + " did not take part in the last step");
  Lane updated = lanes_[lane_id];
  updated.params = params;
  choose(*it, updated);
  updated.generated.back() = it->chosen_token;
  finish_lane_if_done(updated, *it);
  lanes_[lane_id] = std::move(updated);
  if (trace->phase == Phase::kPrefill) strategies_[lane_id] = params;
  trace_bytes_ -= history_.back()->memory_bytes();
  trace_bytes_ += trace->memory_bytes();
  history_.back() = std::move(trace);
}

std::vector<float> Session::attention(int step, int lane, int layer) {
  if (step < 0 || step >= static_cast<int>(history_.size()))
    throw Error("no step " + std::to_string(step));
  if (layer < 0 || layer >= engine_->config().n_layer)
    throw Error("no layer " + std::to_string(layer));
  const StepTrace& trace = *history_[step];
  const int wanted = trace.phase == Phase::kPrefill ? 0 : lane;
  auto it = std::find_if(trace.lanes.begin(), trace.lanes.end(),
                         [&](const LaneStep& ls) { return ls.lane == wanted; });
  if (it == trace.lanes.end())
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
