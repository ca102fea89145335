#pragma once
// A speculative lane's round (sampling/speculative.h has the verification
// rule): the draft model proposes γ tokens one at a time on its own KV
// cache, the target runs ONE forward over the lane's pending token and the γ
// drafts (γ + 1 logits rows, like a small prefill over its cached prefix),
// the verdict says how many drafts are accepted and which token the target
// adds, and both caches are truncated to the accepted length (the rejected
// slots go back to the pool). A round commits 1..γ+1 tokens; back undoes it
// whole. The Session calls these; nothing here changes a Lane until commit.
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/tokenizer.h"
#include "sampling/banned_words.h"
#include "session/session.h"
#include "session/vocab_roles.h"
#include "trace/step_trace.h"

namespace ts {

struct SpecRoundContext {
  Engine& target;
  Engine& draft;
  std::shared_ptr<const BannedTokens> banned;  // null: the stage is off
  int max_new_tokens = 0;
  int eot_id = -1;
  bool record_attention = true;  // the verify pass's γ + 1 attention rows
};

// The γ a new speculative lane starts with (spec=auto: kSpecAutoStartGamma).
int initial_spec_gamma(const SamplingParams& params);

// Runs one round of `lane` (running, speculative, its target sequence caching
// every token of `tokens` (prompt + generated) but the last). Returns the
// round's record; both caches hold the accepted tokens only. On failure both
// caches are as they were and the error is rethrown.
LaneStep run_spec_round(const SpecRoundContext& ctx, const Lane& lane,
                        const std::vector<int>& tokens);

// Gives back a round's cache work: the target to the round's start, the
// draft to its length before the round. For a round that was run but not
// committed, and for back() after commit.
void undo_spec_caches(Engine& target, Engine& draft, const Lane& lane, const LaneStep& record);

// The lane takes the round's tokens and its next γ (never throws).
void commit_spec_round(Lane& lane, const LaneStep& record);
// Undoes commit_spec_round (the caches: undo_spec_caches).
void uncommit_spec_round(Lane& lane, const LaneStep& record);

// Why a speculative lane stops after the round (empty: it runs on): end of
// text, the token limit, or the target's context end.
std::string spec_stop_reason(const Lane& lane, const LaneStep& record, int prompt_tokens,
                             int max_new_tokens, int n_ctx, int eot_id);

// One line naming both sizes when the draft cannot draft for the target
// (their vocabularies differ); empty when it can.
std::string spec_vocab_mismatch(const ModelConfig& target, const ModelConfig& draft,
                                const VocabRoles& roles = {});
// The same by content: one line naming the sizes when they differ, else the
// first id whose token bytes differ (a draft with the target's vocabulary
// size but other ids drafts nonsense); empty when every id is the same token.
std::string spec_vocab_mismatch(const Tokenizer& target, const Tokenizer& draft,
                                const VocabRoles& roles = {});

}  // namespace ts
