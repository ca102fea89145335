#include "session/session.h"

#include <algorithm>
#include <cmath>

#include "sampling/contrastive.h"
#include "sampling/distribution.h"
#include "sampling/sampling_pipeline.h"
#include "session/dola_lane.h"
#include "session/speculative_lane.h"
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
  for (const SamplingParams& p : strategies) {
    p.validate();
    if (p.dola()) dola_layers_for(p, engine_->config());  // layers the model has
  }
  if (!history_.empty()) throw Error("lanes can change only before prefill (press Reset first)");
  strategies_ = strategies;
}

void Session::set_max_new_tokens(int n) {
  if (n <= 0) throw Error("max new tokens must be positive");
  options_.max_new_tokens = n;
}

void Session::set_banned_words(std::shared_ptr<const BannedTokens> banned) {
  banned_words_ = std::move(banned);
}

void Session::set_draft_engine(std::shared_ptr<Engine> draft) {
  if (!history_.empty())
    throw Error("the draft model can change only before prefill (press Reset first)");
  if (draft) {
    const std::string mismatch = spec_vocab_mismatch(engine_->config(), draft->config());
    if (!mismatch.empty()) throw Error(mismatch);
  }
  draft_engine_ = std::move(draft);
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

const Lane& Session::lane_at(int lane) const {
  if (lane < 0 || lane >= static_cast<int>(lanes_.size()))
    throw Error("no lane " + std::to_string(lane));
  return lanes_[lane];
}

int Session::open_lanes() const {
  return static_cast<int>(
      std::count_if(lanes_.begin(), lanes_.end(), [](const Lane& l) { return !l.closed; }));
}

std::vector<int> Session::lane_tokens(int lane) const {
  std::vector<int> ids = prompt_ids();
  const std::vector<int>& generated = lane_at(lane).generated;
  ids.insert(ids.end(), generated.begin(), generated.end());
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
  int running = 0, cached = 0, sequences = 0;
  for (const Lane& lane : lanes_) {
    if (!lane.running()) continue;
    ++running;
    sequences += lane.beam_search()   ? static_cast<int>(lane.beams->beams.size())
                 : lane.contrastive() ? lane.params.contrastive_k
                                      : 1;
    // A contrastive lane's last token is cached already (it ran as a candidate).
    cached = std::max(cached, static_cast<int>(prompt_tokens_.size() + lane.generated.size()) -
                                  (lane.contrastive() ? 0 : 1));
  }
  // Every open beam and every contrastive candidate is a sequence of its own
  // in the batched step.
  const std::string beams = sequences > running ? " (" + std::to_string(sequences) +
                                                      " sequences: one per beam or candidate)"
                                                : "";
  std::string step = "decode step " + std::to_string(history_.size());
  if (std::any_of(lanes_.begin(), lanes_.end(),
                  [](const Lane& l) { return l.running() && l.speculative(); }))
    step +=
        " (speculative lanes: one round each, the draft proposes and the target verifies "
        "in one pass)";
  if (!options_.kv_cache)
    return step + ": KV cache off, recomputes all " + std::to_string(cached + 1) + " tokens" +
           (running > 1 ? " of each of " + std::to_string(running) + " lanes" : "");
  if (running > 1 || sequences > 1)
    return step + ": 1 token for each of " + std::to_string(running) + " lane" +
           (running > 1 ? "s" : "") + beams + ", reads up to " + std::to_string(cached) +
           " cached positions";
  return step + ": 1 token, reads " + std::to_string(cached) + " cached positions";
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
  LaneStep ls = std::move(per_beam[best_parent]);
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
    trace.seconds += ls.spec->draft_seconds + ls.spec->verify_seconds;
    trace.cost += ls.spec->draft_cost;
    trace.cost += ls.spec->verify_cost;
    trace.recomputed_tokens += ls.rows() + ls.spec->draft_tokens_fed;
    chosen.push_back(std::move(ls));
  }
  std::sort(chosen.begin(), chosen.end(),
            [](const LaneStep& a, const LaneStep& b) { return a.lane < b.lane; });
  commit(std::move(trace), std::move(chosen), outcomes);
  return *history_.back();
}

std::vector<LaneStep> Session::run_spec_rounds() {
  std::vector<LaneStep> records;
  if (!draft_engine_) return records;
  const SpecRoundContext ctx{*engine_,
                             *draft_engine_,
                             banned_words_,
                             options_.max_new_tokens,
                             tokenizer_->eot_id(),
                             options_.record_attention};
  try {
    for (const Lane& lane : lanes_)
      if (lane.running() && lane.speculative())
        records.push_back(run_spec_round(ctx, lane, lane_tokens(lane.id)));
  } catch (...) {
    undo_spec_rounds(records);
    throw;
  }
  return records;
}

void Session::undo_spec_rounds(const std::vector<LaneStep>& records) {
  for (const LaneStep& ls : records)
    if (ls.spec) undo_spec_caches(*engine_, *draft_engine_, lanes_[ls.lane], ls);
}

std::vector<Session::DecodeRequest> Session::gather_requests() const {
  std::vector<DecodeRequest> requests;
  for (const Lane& lane : lanes_) {
    if (!lane.running() || lane.speculative()) continue;
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
    } else if (ls.contrastive) {
      commit_contrastive(lane, ls, outcomes[outcome++]);
    } else {
      lane.generated.push_back(ls.chosen_token);
      finish_lane_if_done(lane, ls);
    }
    trace.lanes.push_back(std::move(ls));
  }
  trace.kv_after = engine_->cache().occupancy();
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

std::vector<float> Session::contrastive_probs(const LaneStep& from) const {
  if (!banned_words_) return softmax(from.logits);
  std::vector<float> logits = from.logits;
  apply_banned_words(logits, *banned_words_, from.context_ids);
  return softmax(logits);
}

std::vector<Session::DecodeRequest> Session::candidate_requests(const Lane& lane,
                                                                const LaneStep& from) const {
  const std::vector<int> tokens =
      contrastive_candidates(contrastive_probs(from), lane.params.contrastive_k);
  std::vector<int> context = prompt_ids();
  context.insert(context.end(), lane.generated.begin(), lane.generated.end());
  std::vector<DecodeRequest> requests;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<int> with = context;
    with.push_back(tokens[i]);
    requests.push_back({lane.id, -1, std::move(with), static_cast<int>(lane.generated.size()) + 1,
                        static_cast<int>(i)});
  }
  return requests;
}

void Session::fork_candidates(std::vector<DecodeRequest>& requests,
                              const std::vector<Lane>& lanes) {
  if (!options_.kv_cache) return;
  try {
    for (DecodeRequest& r : requests)
      if (r.candidate >= 0) r.seq = engine_->cache().fork(lanes[r.lane].seq);
  } catch (...) {
    release_candidate_forks(requests, lanes);
    throw;
  }
}

void Session::release_candidate_forks(const std::vector<DecodeRequest>& requests,
                                      const std::vector<Lane>& lanes) {
  KvCacheManager& cache = engine_->cache();
  for (const DecodeRequest& r : requests)
    if (r.candidate >= 0 && r.seq >= 0 && r.seq != lanes[r.lane].seq && cache.contains(r.seq))
      cache.release(r.seq);
}

LaneStep Session::choose_contrastive(const Lane& lane, const LaneStep& from,
                                     std::vector<LaneStep> candidates,
                                     const std::vector<SeqId>& seqs,
                                     ContrastiveOutcome& outcome) const {
  const int c = engine_->config().n_embd;
  if (!lane.hidden) throw Error("contrastive: lane " + std::to_string(lane.id) + " has no states");
  std::vector<int> tokens;
  std::vector<const float*> states;
  for (const LaneStep& cand : candidates) {
    if (static_cast<int>(cand.hidden.size()) != c)
      throw Error("contrastive: a candidate's hidden state is missing");
    tokens.push_back(cand.input_tokens.at(0));
    states.push_back(cand.hidden.data());
  }
  auto step = std::make_shared<ContrastiveStep>(contrastive_rank(
      contrastive_probs(from), tokens, *lane.hidden, states, c, lane.params.penalty_alpha));
  const ContrastiveCandidate& won = step->candidates[step->chosen];
  LaneStep ls = from;
  ls.lane = lane.id;
  ls.params = lane.params;
  ls.chosen_token = won.token;
  ls.chosen_prob = won.prob;
  ls.uniform = 0;
  ls.kept_tokens = step->k;
  ls.banned_words = banned_words_;
  outcome.lane = lane.id;
  outcome.winner_seq = seqs.at(step->chosen);
  for (size_t i = 0; i < seqs.size(); ++i)
    if (static_cast<int>(i) != step->chosen && seqs[i] >= 0) outcome.losers.push_back(seqs[i]);
  outcome.pending = std::make_shared<const LaneStep>(std::move(candidates[step->chosen]));
  ls.contrastive = std::move(step);
  return ls;
}

void Session::commit_contrastive(Lane& lane, const LaneStep& record,
                                 const ContrastiveOutcome& outcome) {
  if (outcome.winner_seq >= 0) {
    KvCacheManager& cache = engine_->cache();
    for (SeqId seq : outcome.losers) cache.release(seq);
    if (lane.seq >= 0) cache.release(lane.seq);
    lane.seq = outcome.winner_seq;
  }
  auto hidden = std::make_shared<std::vector<float>>(*lane.hidden);
  hidden->insert(hidden->end(), outcome.pending->hidden.begin(), outcome.pending->hidden.end());
  lane.hidden = std::move(hidden);
  lane.pending = outcome.pending;
  lane.generated.push_back(record.chosen_token);
  finish_lane_if_done(lane, record);
}

void Session::choose_first_contrastive(std::vector<Lane>& lanes, std::vector<LaneStep>& records,
                                       StepTrace& trace) {
  std::vector<DecodeRequest> requests;
  for (const Lane& lane : lanes) {
    if (!lane.contrastive()) continue;
    std::vector<DecodeRequest> r = candidate_requests(lane, records[lane.id]);
    requests.insert(requests.end(), std::make_move_iterator(r.begin()),
                    std::make_move_iterator(r.end()));
  }
  fork_candidates(requests, lanes);
  std::vector<LaneStep> chosen;
  std::vector<ContrastiveOutcome> outcomes;
  try {
    std::vector<LaneStep> candidates;
    const StepTrace run = forward_requests(requests, candidates);
    // The candidates' forward is part of the prefill step's cost.
    trace.seconds += run.seconds;
    trace.cost += run.cost;
    trace.recomputed_tokens += run.recomputed_tokens;
    for (size_t i = 0; i < requests.size();) {
      const int id = requests[i].lane;
      std::vector<LaneStep> group;
      std::vector<SeqId> seqs;
      for (; i < requests.size() && requests[i].lane == id; ++i) {
        group.push_back(std::move(candidates[i]));
        seqs.push_back(requests[i].seq);
      }
      outcomes.emplace_back();
      chosen.push_back(
          choose_contrastive(lanes[id], records[id], std::move(group), seqs, outcomes.back()));
    }
  } catch (...) {
    release_candidate_forks(requests, lanes);
    throw;
  }
  for (size_t i = 0; i < outcomes.size(); ++i) {
    LaneStep& record = records[outcomes[i].lane];
    record = std::move(chosen[i]);
    commit_contrastive(lanes[outcomes[i].lane], record, outcomes[i]);
  }
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
