#pragma once
// One line per lane for comparing decoding strategies: how likely the model
// found the lane's own text, how repetitive it is, and how fast it came.
#include <vector>

#include "session/session.h"

namespace ts {

// The probability every front end shows beside a lane's chosen token (the
// CLI's --compare cells, the window's Lanes panel): the token's probability
// in the distribution the lane chose it from: after the lane's filters and
// temperature, a DoLa lane's contrast, a speculative round's target row.
inline float lane_choice_probability(const LaneStep& record) { return record.chosen_prob; }
inline constexpr const char* kLaneProbabilityLegend =
    "p: the chosen token's probability in the distribution its lane chose from (after the "
    "lane's filters; DoLa: the contrast's)";

struct LaneSummary {
  int lane = 0;
  int tokens = 0;         // generated tokens (a beam lane: its best sequence)
  double log_prob = 0;    // sum of log p(token | everything before) under the raw model
  double perplexity = 0;  // exp(-log_prob / tokens): of the lane's own text
  // distinct[n - 1] = distinct n-grams / n-grams in the generated tokens,
  // n = 1, 2, 3 (1 = no repetition); NaN when the text is shorter than n.
  double distinct[3] = {0, 0, 0};
  // Wall time of the steps that produced its tokens: for a speculative lane
  // its rounds' own draft and verify passes; for the other lanes the steps'
  // batched forward, which they share (a step's time less the speculative
  // rounds in it). The prefill counts for every lane.
  double seconds = 0;
  double tokens_per_second = 0;  // tokens / seconds (0 when no time was measured)
};

// Distinct n-grams over all n-grams of `tokens`; NaN when there are none.
double distinct_ngram_ratio(const std::vector<int>& tokens, int n);

// The summary of `tokens` given each one's log-probability and the time taken.
LaneSummary summarize_tokens(const std::vector<int>& tokens,
                             const std::vector<double>& token_log_probs, double seconds);

// A lane of a session: log-probabilities from the recorded logits (a beam
// lane: from its best hypothesis or beam), the time of every step with a
// record for it (Session::record, so a branch counts its parent's steps
// before the branch). Throws ts::Error for an unknown lane.
LaneSummary summarize_lane(const Session& session, int lane);
// The same from a history and its lanes (a session reopened from a file).
LaneSummary summarize_lane(const std::vector<StepTracePtr>& history, const std::vector<Lane>& lanes,
                           int lane);

// A speculative lane's rounds (all zero for another lane): drafts accepted
// over drafts proposed, and tokens committed per target pass (one a round).
struct SpecLaneStats {
  int rounds = 0;
  int drafted = 0;
  int accepted = 0;
  int committed = 0;
  double draft_seconds = 0;
  double verify_seconds = 0;
  double acceptance_rate() const { return drafted ? static_cast<double>(accepted) / drafted : 0; }
  double tokens_per_pass() const { return rounds ? static_cast<double>(committed) / rounds : 0; }
};
// Speculative lanes' rounds; lookahead and prompt-lookup lanes count their
// passes as rounds (committed tokens, no drafts: acceptance_rate() is 0).
SpecLaneStats spec_lane_stats(const Session& session, int lane);

}  // namespace ts
