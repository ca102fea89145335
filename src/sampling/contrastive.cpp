#include "sampling/contrastive.h"

#include <cmath>
#include <string>

#include "sampling/distribution.h"
#include "util/error.h"

namespace ts {
namespace {

double score_of(double prob, double penalty, double alpha) {
  return (1.0 - alpha) * prob - alpha * penalty;
}

double norm(const float* v, int c) {
  double s = 0;
  for (int i = 0; i < c; ++i) s += static_cast<double>(v[i]) * v[i];
  return std::sqrt(s);
}

}  // namespace

std::vector<int> contrastive_candidates(const std::vector<float>& probs, int k) {
  return top_n(probs, k);
}

ContrastiveStep contrastive_rank(const std::vector<float>& probs,
                                 const std::vector<int>& candidates,
                                 const std::vector<float>& history,
                                 const std::vector<const float*>& candidate_states, int c,
                                 float alpha) {
  if (c <= 0 || history.empty() || history.size() % c != 0)
    throw Error("contrastive: the history of hidden states is empty or not [positions][C]");
  if (candidates.empty() || candidates.size() != candidate_states.size())
    throw Error("contrastive: one hidden state per candidate is needed");
  ContrastiveStep step;
  step.k = static_cast<int>(candidates.size());
  step.alpha = alpha;
  step.positions = static_cast<int>(history.size() / c);
  step.similarity.resize(static_cast<size_t>(step.k) * step.positions);
  std::vector<double> norms(step.positions);
  for (int p = 0; p < step.positions; ++p) norms[p] = norm(history.data() + p * c, c);
  std::vector<double> scores;
  for (int i = 0; i < step.k; ++i) {
    const int token = candidates[i];
    if (token < 0 || token >= static_cast<int>(probs.size()))
      throw Error("contrastive: candidate token " + std::to_string(token) + " out of range");
    const float* s = candidate_states[i];
    const double s_norm = norm(s, c);
    double best = -INFINITY;
    int best_pos = 0;
    for (int p = 0; p < step.positions; ++p) {
      const float* h = history.data() + static_cast<size_t>(p) * c;
      double dot = 0;
      for (int j = 0; j < c; ++j) dot += static_cast<double>(h[j]) * s[j];
      const double cosine = dot / (norms[p] * s_norm);
      step.similarity[static_cast<size_t>(i) * step.positions + p] = static_cast<float>(cosine);
      if (cosine > best) best = cosine, best_pos = p;  // the first of equal maxima
    }
    ContrastiveCandidate cand;
    cand.token = token;
    cand.prob = probs[token];
    cand.penalty = static_cast<float>(best);
    cand.similar_pos = best_pos;
    scores.push_back(score_of(cand.prob, best, alpha));
    cand.score = static_cast<float>(scores.back());
    step.candidates.push_back(cand);
  }
  // Argmax in double; the first (more probable) candidate wins a tie.
  for (int i = 1; i < step.k; ++i)
    if (scores[i] > scores[step.chosen]) step.chosen = i;
  return step;
}

int contrastive_choice(const std::vector<ContrastiveCandidate>& candidates, float alpha,
                       std::vector<float>* scores) {
  int chosen = 0;
  double best = -INFINITY;
  if (scores) scores->clear();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double s = score_of(candidates[i].prob, candidates[i].penalty, alpha);
    if (scores) scores->push_back(static_cast<float>(s));
    if (s > best) best = s, chosen = static_cast<int>(i);
  }
  return chosen;
}

}  // namespace ts
