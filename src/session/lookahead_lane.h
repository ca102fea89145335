#pragma once
// One pass of lookahead decoding or prompt lookup decoding on an engine
// (sampling/lookahead.h has the window, the pool, the pass layout and the
// verification): x, the candidates and the window go through the model in
// ONE forward with the pass's mask; the verdict commits 1..N tokens, and
// only x and the accepted candidate rows stay in the KV cache (the rest go
// back through Engine::keep_rows). The window and the pool live in an
// immutable LookaheadState, so a pass can be undone by keeping the old one.
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "sampling/banned_words.h"
#include "sampling/lookahead.h"
#include "sampling/sampling_params.h"
#include "session/session.h"
#include "trace/step_trace.h"

namespace ts {

struct LookaheadContext {
  Engine& engine;
  std::shared_ptr<const BannedTokens> banned;  // null: the stage is off
  ForwardOptions options;                      // attention and residuals to record
};

// The state a lookahead lane starts with after prefill.
std::shared_ptr<const LookaheadState> initial_lookahead_state(const LookaheadConfig& config,
                                                              const std::vector<int>& context);

// Runs one pass for `seq`, which caches every token of `tokens` (prompt and
// generated) but the last; generated = tokens already generated (the index
// of the first token this pass commits). params.lookahead_on or
// params.prompt_lookup_on picks the kind; state is the lane's (lookahead).
// On return seq caches every committed token but the last; attention (when
// given and ctx.options records it) receives the pass's [layer][head][row][context].
// On failure the cache is as it was and the error is rethrown.
LookaheadPass run_lookahead_pass(const LookaheadContext& ctx, SeqId seq,
                                 const std::vector<int>& tokens, int generated,
                                 const SamplingParams& params,
                                 const std::shared_ptr<const LookaheadState>& state,
                                 std::vector<std::vector<float>>* attention = nullptr);

// ---- the session's lanes ----

struct LookaheadLaneContext {
  Engine& engine;
  std::shared_ptr<const BannedTokens> banned;  // null: the stage is off
  int eot_id = -1;
  int max_new_tokens = 0;        // the lane's token limit (0: none)
  bool record_attention = true;  // every fed row's attention (the pass's mask shows in it)
};

// Runs one pass of `lane` (running, lookahead or prompt lookup; its sequence
// caches every token of `tokens` (prompt + generated) but the last) and
// returns its record; the cache holds x and the accepted rows. Changes
// nothing in the lane; on failure the cache is as it was.
LaneStep run_lookahead_step(const LookaheadLaneContext& ctx, const Lane& lane,
                            const std::vector<int>& tokens);

// The lane takes the pass's tokens and its new window and pool (never throws).
void commit_lookahead_step(Lane& lane, const LaneStep& record);
// Undoes commit_lookahead_step; the cache goes back with a truncation to
// record.start_pos (the caller's).
void uncommit_lookahead_step(Lane& lane, const LaneStep& record);

}  // namespace ts
