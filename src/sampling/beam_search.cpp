#include "sampling/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace ts {

const char* early_stopping_name(EarlyStopping e) {
  switch (e) {
    case EarlyStopping::kFalse:
      return "false";
    case EarlyStopping::kTrue:
      return "true";
    case EarlyStopping::kNever:
      return "never";
  }
  return "?";
}

const char* candidate_fate_name(CandidateFate f) {
  switch (f) {
    case CandidateFate::kKept:
      return "kept";
    case CandidateFate::kFinished:
      return "finished";
    case CandidateFate::kPruned:
      return "pruned";
  }
  return "?";
}

void validate(const BeamSearchConfig& c) {
  if (c.num_beams < 1) throw Error("beam search: num_beams must be >= 1");
  if (!std::isfinite(c.length_penalty)) throw Error("beam search: length_penalty must be finite");
  if (c.max_new_tokens < 1) throw Error("beam search: max_new_tokens must be >= 1");
}

BeamSearchState beam_search_start() {
  BeamSearchState s;
  s.beams.emplace_back();
  return s;
}

namespace {

double hypothesis_score(double sum_log_prob, int generated_len, float length_penalty) {
  return sum_log_prob / std::pow(static_cast<double>(generated_len), length_penalty);
}

// BeamHypotheses.add: keep the num_beams best, tracking the worst kept score.
void add_hypothesis(BeamSearchState& s, BeamHypothesis h, int num_beams) {
  const int n = static_cast<int>(s.finished.size());
  if (n >= num_beams && !(h.score > s.worst_finished_score)) return;
  s.finished.push_back(std::move(h));
  if (static_cast<int>(s.finished.size()) > num_beams) {
    std::vector<std::pair<double, int>> order;
    for (int i = 0; i < static_cast<int>(s.finished.size()); ++i)
      order.emplace_back(s.finished[i].score, i);
    std::sort(order.begin(), order.end());
    s.finished.erase(s.finished.begin() + order[0].second);
    s.worst_finished_score = order[1].first;
  } else {
    s.worst_finished_score = std::min(s.worst_finished_score, s.finished.back().score);
  }
}

bool is_done(const BeamSearchState& s, double best_sum_log_prob, int cur_len,
             const BeamSearchConfig& c) {
  if (static_cast<int>(s.finished.size()) < c.num_beams) return false;
  int len = cur_len;
  switch (c.early_stopping) {
    case EarlyStopping::kTrue:
      return true;
    case EarlyStopping::kFalse:
      break;
    case EarlyStopping::kNever:
      if (c.length_penalty > 0.0f) len = c.max_new_tokens;
      break;
  }
  return s.worst_finished_score >= hypothesis_score(best_sum_log_prob, len, c.length_penalty);
}

struct Ranked {
  double sum;
  int beam;
  int token;
};

// The `count` best (beam, token) pairs by cumulative log-probability, ties to
// the lower pair. A row contributes at most `count`, so each is cut first.
std::vector<Ranked> best_candidates(const BeamSearchState& s,
                                    const std::vector<std::vector<float>>& log_probs, int count) {
  auto better = [](const Ranked& a, const Ranked& b) {
    if (a.sum != b.sum) return a.sum > b.sum;
    return a.beam != b.beam ? a.beam < b.beam : a.token < b.token;
  };
  std::vector<Ranked> all;
  for (int b = 0; b < static_cast<int>(log_probs.size()); ++b) {
    std::vector<Ranked> row;
    row.reserve(log_probs[b].size());
    for (int t = 0; t < static_cast<int>(log_probs[b].size()); ++t)
      if (log_probs[b][t] != -std::numeric_limits<float>::infinity())  // removed: never a candidate
        row.push_back({s.beams[b].sum_log_prob + log_probs[b][t], b, t});
    const int keep = std::min<int>(count, static_cast<int>(row.size()));
    std::partial_sort(row.begin(), row.begin() + keep, row.end(), better);
    all.insert(all.end(), row.begin(), row.begin() + keep);
  }
  const int keep = std::min<int>(count, static_cast<int>(all.size()));
  std::partial_sort(all.begin(), all.begin() + keep, all.end(), better);
  all.resize(keep);
  return all;
}

}  // namespace

std::vector<BeamCandidate> beam_search_step(BeamSearchState& state,
                                            const std::vector<std::vector<float>>& log_probs,
                                            const BeamSearchConfig& config) {
  validate(config);
  if (state.done) throw Error("beam search: already done");
  if (log_probs.size() != state.beams.size() || log_probs.empty())
    throw Error("beam search: " + std::to_string(log_probs.size()) + " rows for " +
                std::to_string(state.beams.size()) + " beams");
  for (const auto& row : log_probs)
    if (row.size() != log_probs[0].size() || row.empty())
      throw Error("beam search: rows of different or zero size");

  const int n = config.num_beams;
  const int cur_len = state.steps + 1;  // tokens once this step's is appended
  BeamSearchState next;
  next.finished = state.finished;
  next.worst_finished_score = state.worst_finished_score;
  next.steps = cur_len;
  std::vector<BeamCandidate> candidates;
  for (const Ranked& r : best_candidates(state, log_probs, 2 * n)) {
    BeamCandidate c;
    c.parent = r.beam;
    c.token = r.token;
    c.log_prob = log_probs[r.beam][r.token];
    c.sum_log_prob = r.sum;
    candidates.push_back(c);
  }
  if (candidates.empty())
    throw Error(
        "beam search: every token of every open beam was removed (-inf); no beam can "
        "be extended");
  for (int rank = 0; rank < static_cast<int>(candidates.size()); ++rank) {
    if (static_cast<int>(next.beams.size()) == n) break;  // the rest stay pruned
    BeamCandidate& c = candidates[rank];
    const Beam& parent = state.beams[c.parent];
    if (c.token == config.eos_id) {
      if (rank >= n) continue;  // an end of text outside the top num_beams is dropped
      BeamHypothesis h;
      h.tokens = parent.tokens;
      h.token_log_probs = parent.token_log_probs;
      h.token_log_probs.push_back(c.log_prob);
      h.sum_log_prob = c.sum_log_prob;
      h.ended_by_eos = true;
      h.generated_len = cur_len;
      h.score = hypothesis_score(h.sum_log_prob, cur_len, config.length_penalty);
      c.fate = CandidateFate::kFinished;
      add_hypothesis(next, std::move(h), n);
      continue;
    }
    Beam b = parent;
    b.tokens.push_back(c.token);
    b.token_log_probs.push_back(c.log_prob);
    b.sum_log_prob = c.sum_log_prob;
    c.fate = CandidateFate::kKept;
    c.new_beam = static_cast<int>(next.beams.size());
    next.beams.push_back(std::move(b));
  }
  if (next.beams.empty())
    throw Error("beam search: every candidate was an end of text; no beam left to extend");
  next.done = is_done(next, candidates.front().sum_log_prob, cur_len, config);
  state = std::move(next);
  return candidates;
}

std::vector<BeamHypothesis> beam_search_finalize(const BeamSearchState& state,
                                                 const BeamSearchConfig& config) {
  BeamSearchState s = state;
  if (!s.done) {
    for (const Beam& b : state.beams) {
      BeamHypothesis h;
      h.tokens = b.tokens;
      h.token_log_probs = b.token_log_probs;
      h.sum_log_prob = b.sum_log_prob;
      h.generated_len = static_cast<int>(b.tokens.size());
      h.score = hypothesis_score(b.sum_log_prob, h.generated_len, config.length_penalty);
      add_hypothesis(s, std::move(h), config.num_beams);
    }
  }
  // HF sorts ascending (stable) and pops from the end: best first, and among
  // equal scores the later one first.
  std::vector<BeamHypothesis> ranked = std::move(s.finished);
  std::stable_sort(
      ranked.begin(), ranked.end(),
      [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.score < b.score; });
  std::reverse(ranked.begin(), ranked.end());
  return ranked;
}

}  // namespace ts
