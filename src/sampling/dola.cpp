#include "sampling/dola.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace ts {
namespace {

// log softmax in double; logits must be finite (model outputs are).
std::vector<double> log_probs(const std::vector<float>& logits) {
  double mx = -std::numeric_limits<double>::infinity();
  for (float x : logits) {
    if (!std::isfinite(x)) throw Error("dola: the logits contain NaN or infinity");
    mx = std::max(mx, static_cast<double>(x));
  }
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  const double lse = mx + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - lse;
  return out;
}

void check_sizes(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.empty() || a.size() != b.size())
    throw Error("dola: the final and the premature logits differ in size (" +
                std::to_string(a.size()) + " vs " + std::to_string(b.size()) + ")");
}

// Every second layer of [from, to).
std::vector<int> every_second(int from, int to) {
  std::vector<int> out;
  for (int l = from; l < to; l += 2) out.push_back(l);
  return out;
}

}  // namespace

std::string dola_layers_text(DolaMode mode, const std::vector<int>& layers) {
  switch (mode) {
    case DolaMode::kLow:
      return "low";
    case DolaMode::kHigh:
      return "high";
    case DolaMode::kLayers: {
      std::string s;
      for (int l : layers) {
        if (!s.empty()) s += ',';
        s += std::to_string(l);
      }
      return s;
    }
    case DolaMode::kOff:
      break;
  }
  return "off";
}

std::vector<int> dola_candidate_layers(DolaMode mode, const std::vector<int>& layers, int n_layer,
                                       bool tied_embeddings) {
  if (n_layer < 1) throw Error("dola: the model has no layers");
  const int n = n_layer;
  if (mode == DolaMode::kLow) {
    // Layer 0 read through a tied unembedding mostly predicts the input
    // token itself, so HF starts later; a 2-layer model has only layer 1.
    const int start = !tied_embeddings ? 0 : n > 2 ? 2 : n == 2 ? 1 : 0;
    if (start == n / 2) return {start};
    std::vector<int> out = n <= 40 ? every_second(start, n / 2) : every_second(start, 20);
    // A 3-layer model's lower half is layer 1 alone, below where the rule
    // starts: said as such, not as a missing set of logits later.
    if (out.empty())
      throw Error("dola=low: HF's rule (every second layer of the lower half, from layer " +
                  std::to_string(start) + ") picks no layer for a " + std::to_string(n) +
                  "-layer model; name the layers instead, e.g. dola=" + std::to_string(n / 2));
    return out;
  }
  if (mode == DolaMode::kHigh) return n <= 40 ? every_second(n / 2, n) : every_second(n - 20, n);
  if (mode != DolaMode::kLayers) throw Error("dola: no layers asked for");
  if (layers.empty()) throw Error("dola: the layer list is empty");
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] < 0 || layers[i] >= n)
      throw Error("dola: layer " + std::to_string(layers[i]) + " is not a premature layer of a " +
                  std::to_string(n) + "-layer model (0 = embeddings to " + std::to_string(n - 1) +
                  ")");
    for (size_t j = 0; j < i; ++j)
      if (layers[j] == layers[i])
        throw Error("dola: layer " + std::to_string(layers[i]) + " is listed twice");
  }
  return layers;
}

double dola_divergence(const std::vector<float>& final_logits,
                       const std::vector<float>& premature_logits) {
  check_sizes(final_logits, premature_logits);
  const std::vector<double> lf = log_probs(final_logits);
  const std::vector<double> lp = log_probs(premature_logits);
  double sum = 0;
  for (size_t i = 0; i < lf.size(); ++i) {
    const double m = 0.5 * (std::exp(lf[i]) + std::exp(lp[i]));
    if (m <= 0) continue;  // both probabilities underflowed: contributes 0
    const double log_m = std::log(m);
    sum += m * (log_m - lf[i]) + m * (log_m - lp[i]);
  }
  return 0.5 * sum;
}

std::vector<float> dola_contrast(const std::vector<float>& final_logits,
                                 const std::vector<float>& premature_logits, double relative_top) {
  check_sizes(final_logits, premature_logits);
  const std::vector<double> lf = log_probs(final_logits);
  const std::vector<double> lp = log_probs(premature_logits);
  const double threshold = *std::max_element(lf.begin(), lf.end()) + std::log(relative_top);
  std::vector<float> out(lf.size(), -std::numeric_limits<float>::infinity());
  for (size_t i = 0; i < lf.size(); ++i)
    if (lf[i] >= threshold) out[i] = static_cast<float>(lf[i] - lp[i]);
  return out;
}

DolaStep dola_step(const std::vector<float>& final_logits, const std::vector<int>& candidate_layers,
                   const std::vector<std::vector<float>>& premature_logits) {
  if (candidate_layers.empty() || candidate_layers.size() != premature_logits.size())
    throw Error("dola: one set of premature logits per candidate layer is needed");
  DolaStep step;
  step.candidate_layers = candidate_layers;
  step.divergence.assign(candidate_layers.size(), 0.0f);
  size_t best = 0;
  if (candidate_layers.size() > 1) {
    std::vector<double> div(candidate_layers.size());
    for (size_t i = 0; i < candidate_layers.size(); ++i) {
      div[i] = dola_divergence(final_logits, premature_logits[i]);
      step.divergence[i] = static_cast<float>(div[i]);
      if (div[i] > div[best]) best = i;  // the first of equal maxima
    }
  }
  step.premature_layer = candidate_layers[best];
  const std::vector<float>& premature = premature_logits[best];
  step.contrast = dola_contrast(final_logits, premature);

  const std::vector<double> lf = log_probs(final_logits);
  const std::vector<double> lp = log_probs(premature);
  std::vector<int> kept;
  for (size_t i = 0; i < step.contrast.size(); ++i)
    if (std::isfinite(step.contrast[i])) kept.push_back(static_cast<int>(i));
  step.kept = static_cast<int>(kept.size());
  // Rank of each kept token by the final layer alone (ties by lower id).
  std::vector<int> by_final = kept;
  std::stable_sort(by_final.begin(), by_final.end(), [&](int a, int b) { return lf[a] > lf[b]; });
  std::vector<int> by_contrast = kept;
  std::stable_sort(by_contrast.begin(), by_contrast.end(),
                   [&](int a, int b) { return step.contrast[a] > step.contrast[b]; });
  for (int t : by_contrast) {
    if (static_cast<int>(step.top.size()) >= kDolaTopTokens) break;
    DolaToken tok;
    tok.token = t;
    tok.final_logp = static_cast<float>(lf[t]);
    tok.premature_logp = static_cast<float>(lp[t]);
    tok.contrast = step.contrast[t];
    tok.final_rank =
        static_cast<int>(std::find(by_final.begin(), by_final.end(), t) - by_final.begin());
    step.top.push_back(tok);
  }
  return step;
}

}  // namespace ts
