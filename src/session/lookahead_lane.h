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

namespace ts {

// What a lookahead lane carries from pass to pass.
struct LookaheadState {
  LookaheadWindow window;
  NgramPool pool;
};

// The record of one pass.
struct LookaheadPass {
  bool prompt_lookup = false;
  int start_pos = 0;  // x's position (the cached tokens before the pass)
  LookaheadPassLayout layout;
  LookaheadVerdict verdict;
  LookaheadWindow window;                  // before the pass (lookahead only)
  std::vector<int> window_outputs;         // the model's guess after each last-row cell
  int pool_size = 0;                       // n-grams in the pool before the pass
  int new_ngrams = 0;                      // n-grams this pass added
  std::vector<std::vector<float>> logits;  // [committed][vocab]: the row each token was chosen at
  double seconds = 0;
  StepCost cost;
  std::shared_ptr<const LookaheadState> state_before, state_after;  // null for prompt lookup
  int fed() const { return static_cast<int>(layout.tokens.size()); }
};

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
// On return seq caches every committed token but the last. On failure the
// cache is as it was and the error is rethrown.
LookaheadPass run_lookahead_pass(const LookaheadContext& ctx, SeqId seq,
                                 const std::vector<int>& tokens, int generated,
                                 const SamplingParams& params,
                                 const std::shared_ptr<const LookaheadState>& state);

}  // namespace ts
