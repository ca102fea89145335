#include "sampling/speculative.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sampling/draw.h"
#include "util/error.h"

namespace ts {

const char* spec_next_name(SpecNext next) {
  return next == SpecNext::kCorrection ? "correction" : "bonus";
}

SpecVerdict verify_greedy(const std::vector<int>& draft, const std::vector<int>& target_choice) {
  if (target_choice.size() != draft.size() + 1)
    throw Error("speculative: " + std::to_string(draft.size()) + " draft tokens need " +
                std::to_string(draft.size() + 1) + " target rows, got " +
                std::to_string(target_choice.size()));
  SpecVerdict v;
  while (v.accepted < static_cast<int>(draft.size()) &&
         draft[v.accepted] == target_choice[v.accepted])
    ++v.accepted;
  v.next_token = target_choice[v.accepted];
  v.next = v.accepted < static_cast<int>(draft.size()) ? SpecNext::kCorrection : SpecNext::kBonus;
  return v;
}

std::vector<float> residual_distribution(const std::vector<float>& p, const std::vector<float>& q) {
  if (p.size() != q.size())
    throw Error("speculative: p has " + std::to_string(p.size()) + " entries but q has " +
                std::to_string(q.size()));
  std::vector<float> r(p.size(), 0.0f);
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double d = static_cast<double>(p[i]) - static_cast<double>(q[i]);
    if (d > 0) total += d;
  }
  if (!(total > 0)) return r;
  for (size_t i = 0; i < p.size(); ++i) {
    const double d = static_cast<double>(p[i]) - static_cast<double>(q[i]);
    if (d > 0) r[i] = static_cast<float>(d / total);
  }
  return r;
}

int draw_from_probs(const std::vector<float>& probs, double u) {
  // draw_sample walks the tokens with a finite logit: give the positive ones
  // a finite pseudo-logit so that it orders them by their probability.
  std::vector<float> logits(probs.size(), -std::numeric_limits<float>::infinity());
  bool any = false;
  for (size_t i = 0; i < probs.size(); ++i)
    if (probs[i] > 0.0f) logits[i] = 0.0f, any = true;
  if (!any) throw Error("speculative: no token has a probability > 0");
  return draw_sample(logits, probs, u).chosen_token;
}

SpecVerdict verify_sampled(const std::vector<std::vector<float>>& p,
                           const std::vector<std::vector<float>>& q, const std::vector<int>& draft,
                           const std::vector<double>& accept_u, double draw_u) {
  const size_t gamma = draft.size();
  if (p.size() != gamma + 1 || q.size() != gamma || accept_u.size() != gamma)
    throw Error("speculative: " + std::to_string(gamma) + " draft tokens need " +
                std::to_string(gamma + 1) + " target rows, " + std::to_string(gamma) +
                " draft rows and uniforms (got " + std::to_string(p.size()) + ", " +
                std::to_string(q.size()) + ", " + std::to_string(accept_u.size()) + ")");
  if (!(draw_u >= 0.0 && draw_u < 1.0)) throw Error("speculative: uniform outside [0, 1)");
  SpecVerdict v;
  for (size_t i = 0; i < gamma; ++i) {
    const int x = draft[i];
    if (x < 0 || static_cast<size_t>(x) >= q[i].size() || q[i].size() != p[i].size())
      throw Error("speculative: draft token " + std::to_string(x) + " outside the vocabulary");
    const double qx = q[i][x];
    if (!(qx > 0)) throw Error("speculative: the draft proposed a token it gave probability 0");
    const double u = accept_u[i];
    if (!(u >= 0.0 && u < 1.0)) throw Error("speculative: uniform outside [0, 1)");
    const double ratio = static_cast<double>(p[i][x]) / qx;
    v.ratios.push_back(ratio);
    v.uniforms.push_back(u);
    if (u <= ratio) {
      ++v.accepted;
      continue;
    }
    // Rejected: the target's token comes from what p has beyond q.
    v.next = SpecNext::kCorrection;
    v.residual = residual_distribution(p[i], q[i]);
    if (std::none_of(v.residual.begin(), v.residual.end(), [](float r) { return r > 0.0f; })) {
      v.residual_fallback = true;
      v.next_token = draw_from_probs(p[i], draw_u);
    } else {
      v.next_token = draw_from_probs(v.residual, draw_u);
    }
    return v;
  }
  v.next = SpecNext::kBonus;
  v.next_token = draw_from_probs(p[gamma], draw_u);
  return v;
}

int next_auto_gamma(int gamma, int accepted) {
  const int next = accepted >= gamma ? gamma + 2 : gamma - 1;
  return std::clamp(next, kMinSpecGamma, kMaxSpecGamma);
}

double spec_uniform(uint64_t seed, int round_first_index, int slot) {
  if (round_first_index < 0 || slot < 0 || slot > kSpecFinalSlot)
    throw Error("speculative: bad random-number index");
  // A stream of its own: the plain draw uses splitmix64(seed) as its state.
  const uint64_t stream = splitmix64(seed ^ 0x5eec0de5eec0de5ull);
  return uniform_for_step(stream, round_first_index * 64 + slot);
}

}  // namespace ts
