#include "session/lane_summary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "sampling/distribution.h"
#include "util/error.h"

namespace ts {

double distinct_ngram_ratio(const std::vector<int>& tokens, int n) {
  const int total = static_cast<int>(tokens.size()) - n + 1;
  if (n < 1 || total <= 0) return std::numeric_limits<double>::quiet_NaN();
  std::set<std::vector<int>> seen;
  for (int i = 0; i < total; ++i) seen.emplace(tokens.begin() + i, tokens.begin() + i + n);
  return static_cast<double>(seen.size()) / total;
}

LaneSummary summarize_tokens(const std::vector<int>& tokens,
                             const std::vector<double>& token_log_probs, double seconds) {
  if (tokens.size() != token_log_probs.size())
    throw Error("lane summary: " + std::to_string(tokens.size()) + " tokens but " +
                std::to_string(token_log_probs.size()) + " log-probabilities");
  LaneSummary s;
  s.tokens = static_cast<int>(tokens.size());
  for (double lp : token_log_probs) s.log_prob += lp;
  s.perplexity = s.tokens ? std::exp(-s.log_prob / s.tokens) : 0.0;
  for (int n = 1; n <= 3; ++n) s.distinct[n - 1] = distinct_ngram_ratio(tokens, n);
  s.seconds = seconds;
  s.tokens_per_second = seconds > 0 ? s.tokens / seconds : 0.0;
  return s;
}

LaneSummary summarize_lane(const std::vector<StepTracePtr>& history, const std::vector<Lane>& lanes,
                           int lane_id) {
  if (lane_id < 0 || lane_id >= static_cast<int>(lanes.size()))
    throw Error("no lane " + std::to_string(lane_id));
  const Lane& lane = lanes[lane_id];
  const std::vector<int>& tokens = lane.generated;
  std::vector<double> log_probs(tokens.size(), 0.0);
  double seconds = 0;
  const BeamStep* last_beam_step = nullptr;
  for (int step = 0; step < static_cast<int>(history.size()); ++step) {
    const LaneStep* r = lane_record(history, lanes, step, lane_id);
    if (!r) continue;
    // A speculative round's or a lookahead pass's own passes; the other
    // lanes share the step's batched forward, which is the step's time less
    // those.
    const auto own_seconds = [](const LaneStep& ls) {
      return ls.spec        ? ls.spec->draft_seconds + ls.spec->verify_seconds
             : ls.lookahead ? ls.lookahead->seconds
                            : 0.0;
    };
    double apart = 0;
    for (const LaneStep& ls : history[step]->lanes) apart += own_seconds(ls);
    seconds +=
        r->spec || r->lookahead ? own_seconds(*r) : std::max(0.0, history[step]->seconds - apart);
    if (r->beam) {
      last_beam_step = r->beam.get();
    } else if (r->spec) {
      // A speculative round commits several tokens, each chosen from its own
      // row of the verify pass.
      const SpecRound& round = *r->spec;
      for (size_t j = 0; j < round.committed.size(); ++j) {
        const size_t at = static_cast<size_t>(round.first_index) + j;
        if (at < tokens.size() && tokens[at] == round.committed[j])
          log_probs[at] = log_softmax(round.target_logits[j])[round.committed[j]];
      }
    } else if (r->lookahead) {
      // A lookahead pass too: each token from the row it was chosen at.
      const LookaheadPass& pass = *r->lookahead;
      for (size_t j = 0; j < pass.committed.size() && j < pass.logits.size(); ++j) {
        const size_t at = static_cast<size_t>(pass.first_index) + j;
        if (at < tokens.size() && tokens[at] == pass.committed[j])
          log_probs[at] = log_softmax(pass.logits[j])[pass.committed[j]];
      }
    } else if (r->step_index < static_cast<int>(tokens.size()) &&
               tokens[r->step_index] == r->chosen_token && r->chosen_token >= 0 &&
               r->chosen_token < static_cast<int>(r->logits.size())) {
      log_probs[r->step_index] = log_softmax(r->logits)[r->chosen_token];
    }
  }
  if (last_beam_step && (!last_beam_step->final.empty() ||
                         (last_beam_step->after && !last_beam_step->after->beams.empty()))) {
    // The lane's tokens are its best hypothesis once stopped, else its best beam.
    const std::vector<float>& lps = last_beam_step->final.empty()
                                        ? last_beam_step->after->beams[0].token_log_probs
                                        : last_beam_step->final[0].token_log_probs;
    std::copy_n(lps.begin(), std::min(lps.size(), log_probs.size()), log_probs.begin());
  }
  LaneSummary s = summarize_tokens(tokens, log_probs, seconds);
  s.lane = lane_id;
  return s;
}

LaneSummary summarize_lane(const Session& session, int lane_id) {
  return summarize_lane(session.history(), session.lanes(), lane_id);
}

SpecLaneStats spec_lane_stats(const Session& session, int lane_id) {
  SpecLaneStats s;
  for (int step = 0; step < static_cast<int>(session.history().size()); ++step) {
    const LaneStep* r = session.record(step, lane_id);
    if (r && r->lookahead) {  // a pass: tokens per pass, no draft
      ++s.rounds;
      s.committed += static_cast<int>(r->lookahead->committed.size());
      s.verify_seconds += r->lookahead->seconds;
      continue;
    }
    if (!r || !r->spec) continue;
    ++s.rounds;
    s.drafted += r->spec->gamma;
    s.accepted += r->spec->accepted;
    s.committed += static_cast<int>(r->spec->committed.size());
    s.draft_seconds += r->spec->draft_seconds;
    s.verify_seconds += r->spec->verify_seconds;
  }
  return s;
}

}  // namespace ts
