#pragma once
// The verification step of speculative decoding (Leviathan et al. 2022;
// Hugging Face transformers' assisted generation): a draft model proposed γ
// tokens, the target scored them in one pass (γ + 1 rows), and these pure
// functions decide how many are accepted and which token the target adds.
//
// Greedy: the longest prefix of the draft equal to the target's choice at
// each row is accepted, then the target's own choice at the next row is
// added (a correction after a mismatch, a bonus when all γ matched). The
// output is the target's plain greedy output, token for token.
//
// Sampled: p (target) and q (draft) are the same warped distributions (the
// lane's sampling pipeline on each model's logits). Draft token x_i is
// accepted while u_i <= p_i(x_i) / q_i(x_i); at the first rejection the
// target's token is drawn from norm(max(0, p_i - q_i)); when all γ are
// accepted a bonus token is drawn from p_γ. Each token then follows the
// target's own warped distribution exactly.
#include <cstdint>
#include <string>
#include <vector>

namespace ts {

inline constexpr int kMinSpecGamma = 1;
inline constexpr int kMaxSpecGamma = 16;
// spec=auto starts here and adapts (next_auto_gamma).
inline constexpr int kSpecAutoStartGamma = 4;

enum class SpecNext { kCorrection, kBonus };
const char* spec_next_name(SpecNext next);

struct SpecVerdict {
  int accepted = 0;  // draft tokens accepted, 0..γ
  int next_token = -1;
  SpecNext next = SpecNext::kBonus;  // correction: accepted < γ
  // Sampled only, one entry per draft token checked (accepted ones and the
  // rejected one): p(x) / q(x) and the uniform compared with it.
  std::vector<double> ratios;
  std::vector<double> uniforms;
  // Sampled with a rejection: norm(max(0, p - q)) at the rejected row, the
  // distribution next_token was drawn from (empty otherwise). When p - q has
  // no positive mass (p equals q up to rounding) next_token is drawn from p
  // and residual_fallback is set.
  std::vector<float> residual;
  bool residual_fallback = false;
};

// Greedy verification. target_choice has γ + 1 entries: the target's
// choice after each prefix of the draft (row i follows draft[0..i)).
// Throws ts::Error when the sizes disagree.
SpecVerdict verify_greedy(const std::vector<int>& draft, const std::vector<int>& target_choice);

// Sampled verification. p has γ + 1 rows, q has γ rows, each a probability
// vector over the same vocabulary; accept_u has γ uniforms in [0, 1) (only
// the first accepted + 1 are used) and draw_u draws the final token. Throws
// ts::Error for mismatched sizes, a uniform outside [0, 1), or a draft token
// with q(x) = 0 (the draft could not have proposed it).
SpecVerdict verify_sampled(const std::vector<std::vector<float>>& p,
                           const std::vector<std::vector<float>>& q, const std::vector<int>& draft,
                           const std::vector<double>& accept_u, double draw_u);

// norm(max(0, p - q)); all zeros when p - q has no positive mass.
std::vector<float> residual_distribution(const std::vector<float>& p, const std::vector<float>& q);

// Inverse-CDF draw from probs (need not sum to 1) with u in [0, 1), in the
// sampling pipeline's order (probability descending, ties by lower id).
// Throws ts::Error when no entry is positive.
int draw_from_probs(const std::vector<float>& probs, double u);

// HF's adaptive schedule: γ + 2 after a round that accepted all γ drafted,
// else max(1, γ - 1); kept within [kMinSpecGamma, kMaxSpecGamma].
int next_auto_gamma(int gamma, int accepted);

// The random numbers of a sampled speculative lane: counter-based like the
// plain draw (uniform_for_step), on a stream of their own so that they never
// repeat the first token's draw. A round is keyed by the index of the first
// token it commits (strictly increasing from round to round); slot 0..15 are
// the draft's draws, 16..31 the acceptance tests, 32 the final draw.
inline constexpr int kSpecDraftSlot = 0;
inline constexpr int kSpecAcceptSlot = 16;
inline constexpr int kSpecFinalSlot = 32;
double spec_uniform(uint64_t seed, int round_first_index, int slot);

}  // namespace ts
