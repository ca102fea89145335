#pragma once
// The figures of the bench's speculative-decoding section, computed from the
// round records a speculative lane leaves in the session's trace
// (trace/step_trace.h: SpecRound), and the speed-up the theory predicts from
// them (Leviathan et al. 2022): a round drafts γ tokens (γ draft passes) and
// verifies them in one target pass; with each draft token accepted with
// probability α, a round commits (1 - α^(γ+1)) / (1 - α) tokens on average
// and costs γ c + 1 target decode steps, c = one draft pass over one target
// decode step.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.h"
#include "trace/step_trace.h"

namespace ts::bench {

struct BenchOptions;

// (1 - α^(γ+1)) / ((1 - α)(γ c + 1)); at α = 1 its limit (γ + 1) / (γ c + 1).
// γ may be fractional (spec=auto: the mean γ drafted per round). Throws
// ts::Error for α outside [0, 1], γ <= 0 or c < 0 (not finite included).
double predicted_speedup(double alpha, double gamma, double c);

// Totals over a lane's speculative rounds.
struct SpecRoundTotals {
  int rounds = 0;
  int drafted = 0;   // Σ γ drafted
  int accepted = 0;  // Σ drafts accepted
  int committed = 0;
  int draft_passes = 0;
  double draft_seconds = 0;
  double verify_seconds = 0;
  // accepted / drafted (0 when nothing was drafted).
  double acceptance_rate() const;
  // drafted / rounds: γ per round (spec=auto adapts it; clamped near the end).
  double mean_gamma() const;
  double seconds_per_draft_pass() const;
  double seconds_per_verify_pass() const;
};
SpecRoundTotals total_rounds(const std::vector<const SpecRound*>& rounds);

// c = one draft pass over one plain decode step of the target. Throws
// ts::Error when the step time is not positive or either time is not finite.
double cost_ratio(double draft_pass_seconds, double target_step_seconds);

// Throws ts::Error (one line) when `draft` cannot draft for `target`: their
// vocabularies differ. `what` names the pair in the message.
void check_spec_pair(const ModelConfig& target, const ModelConfig& draft, const std::string& what);

// The bench's speculative section: speculative (greedy) against plain greedy
// decoding on each pair the options name (the model with --draft-model, the
// model with itself for --spec-self-draft, or the random pairs written to
// --spec-random-pairs DIR; `model_dir` is the model, empty for the random
// pairs), with a summary per pair on stderr. `identical` turns false when a
// speculative output differs from plain greedy's.
nlohmann::json bench_speculative(const BenchOptions& o, const std::string& model_dir,
                                 bool& identical);

}  // namespace ts::bench
