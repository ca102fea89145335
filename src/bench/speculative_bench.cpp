#include "bench/speculative_bench.h"

#include <cmath>

#include "session/speculative_lane.h"
#include "util/error.h"

namespace ts::bench {

double predicted_speedup(double alpha, double gamma, double c) {
  if (!(alpha >= 0.0 && alpha <= 1.0))
    throw Error("predicted speed-up: the acceptance rate " + std::to_string(alpha) +
                " is outside [0, 1]");
  if (!(gamma > 0.0) || !std::isfinite(gamma))
    throw Error("predicted speed-up: the draft length " + std::to_string(gamma) +
                " is not positive");
  if (!(c >= 0.0) || !std::isfinite(c))
    throw Error("predicted speed-up: the cost ratio " + std::to_string(c) + " is negative");
  const double cost = gamma * c + 1.0;  // in target decode steps
  // Tokens a round commits: 1 + α + ... + α^γ, whose closed form divides by
  // zero at α = 1, where it is γ + 1.
  const double tokens =
      alpha == 1.0 ? gamma + 1.0 : (1.0 - std::pow(alpha, gamma + 1.0)) / (1.0 - alpha);
  return tokens / cost;
}

double SpecRoundTotals::acceptance_rate() const {
  return drafted ? static_cast<double>(accepted) / drafted : 0.0;
}
double SpecRoundTotals::mean_gamma() const {
  return rounds ? static_cast<double>(drafted) / rounds : 0.0;
}
double SpecRoundTotals::seconds_per_draft_pass() const {
  return draft_passes ? draft_seconds / draft_passes : 0.0;
}
double SpecRoundTotals::seconds_per_verify_pass() const {
  return rounds ? verify_seconds / rounds : 0.0;
}

SpecRoundTotals total_rounds(const std::vector<const SpecRound*>& rounds) {
  SpecRoundTotals t;
  for (const SpecRound* r : rounds) {
    if (!r) continue;
    ++t.rounds;
    t.drafted += r->gamma;
    t.accepted += r->accepted;
    t.committed += static_cast<int>(r->committed.size());
    t.draft_passes += r->draft_passes;
    t.draft_seconds += r->draft_seconds;
    t.verify_seconds += r->verify_seconds;
  }
  return t;
}

double cost_ratio(double draft_pass_seconds, double target_step_seconds) {
  if (!(target_step_seconds > 0.0) || !std::isfinite(target_step_seconds))
    throw Error("cost ratio: the target's decode step time is not positive");
  if (!(draft_pass_seconds >= 0.0) || !std::isfinite(draft_pass_seconds))
    throw Error("cost ratio: the draft pass time is negative");
  return draft_pass_seconds / target_step_seconds;
}

void check_spec_pair(const ModelConfig& target, const ModelConfig& draft, const std::string& what) {
  const std::string mismatch = spec_vocab_mismatch(target, draft);
  if (!mismatch.empty()) throw Error(what + ": " + mismatch);
}

}  // namespace ts::bench
