#pragma once
// The step machine both front ends drive:
//   set_prompt -> prefill (pause) -> step (one token per lane, pause) -> ...
// with step back, run to the end and reset. Lanes (one sequence each, own
// strategy and seed) share the prompt's KV blocks through a forked cache.
// Every step publishes an immutable StepTrace. Any refused command (bad
// prompt, invalid parameter, full context or cache) throws ts::Error and
// leaves the session exactly as it was.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "model/tokenizer.h"
#include "sampling/banned_words.h"
#include "sampling/beam_search.h"
#include "sampling/sampling_params.h"
#include "trace/step_trace.h"

namespace ts {

struct SessionOptions {
  int max_new_tokens = 64;  // per lane
  bool record_attention = true;
  int64_t trace_budget_bytes = 256ll << 20;  // beyond it, attention is recomputed on demand
  bool kv_cache = true;                      // false: every decode step recomputes everything
  bool record_residuals = true;              // for the logit lens
};

enum class SessionState {
  kNoPrompt,  // nothing to run
  kReady,     // prompt tokenized, waiting for prefill
  kPaused,    // after prefill or a decode step; step() continues
  kFinished,  // every lane stopped (end of text, token limit, context end)
};
const char* state_name(SessionState state);

// One lane of generation. Lane ids are indices into Session::lanes() and never
// change: a closed lane stays in the list (closed, no KV sequence) so that the
// history's records keep pointing at the right lane.
//
// Branched lanes: a lane made by Session::branch has its own records only from
// history step first_step on. For earlier steps up to branch_step, its tokens
// are its parent's: Session::record(step, lane) falls back to the parent's
// record (and, at branch_step, to branch_record: the parent's record with this
// lane's token chosen instead). Between branch_step and first_step it did not
// exist and has no record.
//
// Contrastive lanes (params.contrastive_k > 1) run their k candidates in
// one batched forward, each on a fork of the lane's sequence (blocks shared
// copy-on-write); the winner's fork becomes the lane's sequence and the
// others are released. Their records carry a ContrastiveStep.
//
// Beam lanes (params.num_beams > 1) keep num_beams KV sequences that share
// blocks copy-on-write; generated is the best open beam while running and the
// best hypothesis once stopped. Each of their records carries a BeamStep.
struct Lane {
  int id = 0;
  SamplingParams params;
  SeqId seq = -1;              // its KV cache sequence (-1 before prefill / cache off / closed);
                               // beam lanes: the best open beam's (beam_seqs[0])
  std::vector<int> generated;  // chosen tokens; the last one is not cached yet
  std::string stop_reason;     // empty while the lane runs
  bool running() const { return stop_reason.empty(); }

  // Beam lanes only.
  std::shared_ptr<const BeamSearchState> beams;  // open beams and finished hypotheses
  std::vector<SeqId> beam_seqs;                  // one KV sequence per open beam
  bool beam_search() const { return beams != nullptr; }

  // Contrastive lanes only (params.contrastive()). The winner of each step
  // was computed as a candidate, so `seq` caches every chosen token; pending
  // is the record the next step chooses from (the winner's logits, attention
  // and state at its position), hidden the last layer's state after ln_f at
  // every cached position, [positions][C].
  std::shared_ptr<const LaneStep> pending;
  std::shared_ptr<const std::vector<float>> hidden;
  bool contrastive() const { return params.contrastive(); }

  // Speculative lanes only (params.speculative(); session/speculative_lane.h):
  // the draft model's KV sequence (caching a prefix of the lane's tokens)
  // and the γ the next round plans. A step is one round (1..γ+1 tokens).
  SeqId draft_seq = -1;
  int spec_gamma = 0;
  bool speculative() const { return params.speculative(); }

  // Lookahead and prompt-lookup lanes (params.draft_free();
  // session/lookahead_lane.h): a step is one pass (1..N tokens); lookahead
  // lanes carry their Jacobi window and n-gram pool from pass to pass.
  std::shared_ptr<const LookaheadState> lookahead_state;
  bool draft_free() const { return params.draft_free(); }

  // Branching.
  int parent = -1;       // the lane it was branched from; -1: started at prefill
  int branch_step = -1;  // history step whose choice it replaced
  int first_step = 0;    // first history step that can hold its own record
  std::shared_ptr<const LaneStep> branch_record;  // its record at branch_step
  bool closed = false;                            // close_lane: blocks released, never steps
};

inline constexpr int kMaxLanes = 8;  // open lanes at once

// The record describing lane `lane` at history step `step` in a history and
// its lanes (a Session's, or a SessionSnapshot's): the lane's own record or,
// for a branched lane before its first own step, its parent's (see Lane).
// Null when the lane did not take part in that step.
const LaneStep* lane_record(const std::vector<StepTracePtr>& history,
                            const std::vector<Lane>& lanes, int step, int lane);

class Session {
 public:
  Session(std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<Engine> engine,
          SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Tokenizes and validates the prompt; drops any previous generation.
  void set_prompt(std::string_view text);
  // One strategy per lane (1..8). Before prefill only.
  void set_strategies(const std::vector<SamplingParams>& strategies);
  void set_max_new_tokens(int n);
  void set_kv_cache(bool enabled);  // before prefill only
  // The draft model of speculative lanes (any model sharing the target's
  // vocabulary; the target's own engine is allowed). Before prefill only; a
  // vocabulary mismatch is refused naming both sizes. Null: none.
  void set_draft_engine(std::shared_ptr<Engine> draft);
  const std::shared_ptr<Engine>& draft_engine() const { return draft_engine_; }
  // The banned-words stage (sampling/banned_words.h) of every lane: null
  // switches it off. Allowed at any time: it applies to every choice made
  // after the call (the next step, a rechoose, a branch's probability); each
  // record keeps the list its choice used. The prompt is never changed.
  void set_banned_words(std::shared_ptr<const BannedTokens> banned);
  const std::shared_ptr<const BannedTokens>& banned_words() const { return banned_words_; }

  const StepTrace& prefill();
  const StepTrace& step();
  void back();   // undo the last step (after prefill: back to kReady)
  void reset();  // back to kReady, prompt kept
  // Steps until every lane stopped, max_steps were taken, or should_stop()
  // returns true. Returns the number of steps taken.
  int run(int max_steps, const std::function<bool()>& should_stop = {});

  // Re-chooses the last step's token of one lane with new parameters: the
  // logits do not change, only the choice (the pending token) does.
  void rechoose(int lane, const SamplingParams& params);

  // Branching. branch() forks a new lane from `lane` as it was at history
  // step `step`, with `token` chosen there instead: its KV sequence is a fork
  // of the lane's, truncated (never recomputed); from the next step() on it
  // steps with the others. Returns the new lane's id. Needs fewer than
  // kMaxLanes open lanes; beam and contrastive lanes cannot be branched.
  int branch(int step, int lane, int token);
  // Undoes the last token of one lane only (its latest record is removed
  // from the history; a decode step left with no record stays, empty).
  void back_lane(int lane);
  // Stops a lane for good and releases its KV blocks; its records stay.
  void close_lane(int lane);

  // lane_record() over this session's history and lanes.
  const LaneStep* record(int step, int lane) const;

  // Attention of one layer for (step, lane): [head][rows][context]. Taken from
  // the trace, or recomputed when the budget left it out.
  std::vector<float> attention(int step, int lane, int layer);

  SessionState state() const;
  bool can_step() const;
  std::string next_action() const;  // what prefill()/step() would compute now
  const std::string& prompt_text() const { return prompt_text_; }
  const std::vector<TokenSpan>& prompt_tokens() const { return prompt_tokens_; }
  std::vector<int> prompt_ids() const;
  const std::vector<Lane>& lanes() const { return lanes_; }
  int open_lanes() const;
  std::vector<int> lane_tokens(int lane) const;  // prompt + generated
  const std::vector<StepTracePtr>& history() const { return history_; }
  const SessionOptions& options() const { return options_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  std::shared_ptr<const Tokenizer> shared_tokenizer() const { return tokenizer_; }
  Engine& engine() { return *engine_; }
  const Engine& engine() const { return *engine_; }
  // Bytes of attention and logits the history holds (what the trace budget limits).
  int64_t trace_bytes() const { return trace_bytes_; }

 private:
  void release_lanes();
  void release_lane_sequences(Lane& lane);
  const Lane& lane_at(int lane) const;  // throws for an unknown id
  void choose(LaneStep& step, const Lane& lane) const;
  void finish_lane_if_done(Lane& lane, const LaneStep& step) const;
  BeamSearchConfig beam_config(const Lane& lane) const;
  // Scores a beam lane's step from one record per open beam (in beam order)
  // without changing anything: the record of the beam the new best beam
  // extends, with the whole step in its BeamStep. commit_beams then applies
  // it (never throws): new beams fork their parents' sequences, the old ones
  // are released.
  LaneStep advance_beams(const Lane& lane, std::vector<LaneStep> per_beam) const;
  void commit_beams(Lane& lane, const LaneStep& record);
  // Undoes one record of a lane (its latest): tokens, beams and KV cache.
  // Beam lanes get new sequences (the old ones are left for the caller to
  // release with release_unused_sequences); other lanes are truncated.
  void undo_record(Lane& lane, const LaneStep& record);
  void release_unused_sequences(const Lane& from, const Lane& kept);
  void replace_step(int index, std::shared_ptr<StepTrace> trace);
  // A new KV sequence caching `tokens`, forked from whichever source (a
  // sequence and the tokens it caches) shares the longest prefix with them;
  // only the rest is computed.
  struct CachedSequence {
    SeqId seq;
    std::vector<int> tokens;
  };
  SeqId sequence_for(const std::vector<int>& tokens, const std::vector<CachedSequence>& sources);
  void apply_budget(StepTrace& trace);
  // The prefill's forward options: attention only for the layers the trace budget can keep.
  ForwardOptions prefill_options(size_t tokens, bool hidden) const;
  void publish(std::shared_ptr<StepTrace> trace);
  // A trace for the next history step, with the step's measured time and cost
  // and the number of tokens it ran through the model.
  StepTrace make_trace(Phase phase, double seconds, const StepCost& cost,
                       int recomputed_tokens) const;

  // The stages of a decode step (step()): gather, forward, choose, commit.
  // One request per running sequence: a lane's, or each open beam's.
  struct DecodeRequest {
    int lane;
    SeqId seq;                 // -1 with the cache off
    std::vector<int> context;  // prompt + tokens; the last one is fed now
    int step_index;            // index of the token it chooses in its lane
    int candidate = -1;        // contrastive lanes: which candidate it feeds
  };
  // The probabilities a contrastive lane ranks after record `from`: the raw
  // model's with the banned-words stage applied when it is on (HF runs the
  // logits processors before contrastive search's top-k).
  std::vector<float> contrastive_probs(const LaneStep& from) const;
  // Contrastive lanes: the requests that run a lane's k candidates, chosen
  // from record `from` (seq -1: fork_candidates gives each its own fork).
  std::vector<DecodeRequest> candidate_requests(const Lane& lane, const LaneStep& from) const;
  // One fork of its lane's sequence per candidate request (cache on); on
  // failure every fork made is released.
  void fork_candidates(std::vector<DecodeRequest>& requests, const std::vector<Lane>& lanes);
  // Releases the forks of candidate requests except the lanes' sequences.
  void release_candidate_forks(const std::vector<DecodeRequest>& requests,
                               const std::vector<Lane>& lanes);
  // What a contrastive lane's step decided (the winner's record is the next
  // step's pending record, its fork the lane's sequence).
  struct ContrastiveOutcome {
    int lane = -1;
    SeqId winner_seq = -1;
    std::vector<SeqId> losers;  // the other candidates' forks, released at commit
    std::shared_ptr<const LaneStep> pending;
  };
  // Ranks a lane's candidates (their records, in candidate order) and
  // returns the lane's record: `from` with the winner chosen. Changes nothing.
  LaneStep choose_contrastive(const Lane& lane, const LaneStep& from,
                              std::vector<LaneStep> candidates, const std::vector<SeqId>& seqs,
                              ContrastiveOutcome& outcome) const;
  // The lane takes the winner (never throws): sequence, states, pending.
  void commit_contrastive(Lane& lane, const LaneStep& record, const ContrastiveOutcome& outcome);
  // Prefill's second forward: every contrastive lane's candidates for its
  // first token; records[i] is lane i's prefill record (chosen here).
  void choose_first_contrastive(std::vector<Lane>& lanes, std::vector<LaneStep>& records,
                                StepTrace& trace);
  std::vector<DecodeRequest> gather_requests() const;
  // next_action() with the cache off: the tokens the next step feeds.
  std::string uncached_feed() const;
  // Runs the model for every request (one batched forward with the cache, a
  // recomputation of each whole context without it): one record per request
  // with its logits, residuals and attention row, and the step's trace.
  StepTrace forward_requests(const std::vector<DecodeRequest>& requests,
                             std::vector<LaneStep>& records);
  // One record per lane with its token chosen (beam lanes: scored over their
  // beams' records). Changes nothing.
  std::vector<LaneStep> choose_tokens(const std::vector<DecodeRequest>& requests,
                                      std::vector<LaneStep> records,
                                      std::vector<ContrastiveOutcome>& outcomes) const;
  // Each lane takes its chosen token (beam lanes: their new beams,
  // contrastive lanes: their winners); the trace goes into the history.
  // Never throws for a chosen record.
  void commit(StepTrace trace, std::vector<LaneStep> lane_records,
              const std::vector<ContrastiveOutcome>& outcomes);
  // Speculative lanes: one round each (session/speculative_lane.h), run
  // before the other lanes' batched forward; on failure every round run is
  // undone. undo_spec_rounds gives back the caches of rounds not committed.
  // Lookahead and prompt-lookup lanes run their own passes here too.
  std::vector<LaneStep> run_spec_rounds();
  void undo_spec_rounds(const std::vector<LaneStep>& records);

  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<Engine> engine_;
  std::shared_ptr<Engine> draft_engine_;  // speculative lanes' draft model
  SessionOptions options_;
  std::string prompt_text_;
  std::vector<TokenSpan> prompt_tokens_;
  std::vector<SamplingParams> strategies_{SamplingParams{}};
  std::shared_ptr<const BannedTokens> banned_words_;
  std::vector<Lane> lanes_;
  std::vector<StepTracePtr> history_;
  int64_t trace_bytes_ = 0;
};

}  // namespace ts
