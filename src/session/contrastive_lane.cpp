// A contrastive-search lane: each step runs the top-k candidates as forks in
// one batched forward and keeps the one whose hidden state is least like the
// context's (the degeneration penalty).
#include "session/session.h"

#include "sampling/distribution.h"
#include "util/error.h"

namespace ts {

std::vector<float> Session::contrastive_probs(const LaneStep& from) const {
  if (!banned_words_) return softmax(from.logits);
  std::vector<float> logits = from.logits;
  apply_banned_words(logits, *banned_words_, from.context_ids);
  return softmax(logits);
}

std::vector<Session::DecodeRequest> Session::candidate_requests(const Lane& lane,
                                                                const LaneStep& from) const {
  const std::vector<int> tokens =
      contrastive_candidates(contrastive_probs(from), lane.params.contrastive_k);
  std::vector<int> context = prompt_ids();
  context.insert(context.end(), lane.generated.begin(), lane.generated.end());
  std::vector<DecodeRequest> requests;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<int> with = context;
    with.push_back(tokens[i]);
    requests.push_back({lane.id, -1, std::move(with), static_cast<int>(lane.generated.size()) + 1,
                        static_cast<int>(i)});
  }
  return requests;
}

void Session::fork_candidates(std::vector<DecodeRequest>& requests,
                              const std::vector<Lane>& lanes) {
  if (!options_.kv_cache) return;
  try {
    for (DecodeRequest& r : requests)
      if (r.candidate >= 0) r.seq = engine_->cache().fork(lanes[r.lane].seq);
  } catch (...) {
    release_candidate_forks(requests, lanes);
    throw;
  }
}

void Session::release_candidate_forks(const std::vector<DecodeRequest>& requests,
                                      const std::vector<Lane>& lanes) {
  KvCacheManager& cache = engine_->cache();
  for (const DecodeRequest& r : requests)
    if (r.candidate >= 0 && r.seq >= 0 && r.seq != lanes[r.lane].seq && cache.contains(r.seq))
      cache.release(r.seq);
}

LaneStep Session::choose_contrastive(const Lane& lane, const LaneStep& from,
                                     std::vector<LaneStep> candidates,
                                     const std::vector<SeqId>& seqs,
                                     ContrastiveOutcome& outcome) const {
  const int c = engine_->config().n_embd;
  if (!lane.hidden) throw Error("contrastive: lane " + std::to_string(lane.id) + " has no states");
  std::vector<int> tokens;
  std::vector<const float*> states;
  for (const LaneStep& cand : candidates) {
    if (static_cast<int>(cand.hidden.size()) != c)
      throw Error("contrastive: a candidate's hidden state is missing");
    tokens.push_back(cand.input_tokens.at(0));
    states.push_back(cand.hidden.data());
  }
  auto step = std::make_shared<ContrastiveStep>(contrastive_rank(
      contrastive_probs(from), tokens, *lane.hidden, states, c, lane.params.penalty_alpha));
  const ContrastiveCandidate& won = step->candidates[step->chosen];
  LaneStep ls = from;
  ls.lane = lane.id;
  ls.params = lane.params;
  ls.chosen_token = won.token;
  ls.chosen_prob = won.prob;
  ls.uniform = 0;
  ls.kept_tokens = step->k;
  ls.banned_words = banned_words_;
  outcome.lane = lane.id;
  outcome.winner_seq = seqs.at(step->chosen);
  for (size_t i = 0; i < seqs.size(); ++i)
    if (static_cast<int>(i) != step->chosen && seqs[i] >= 0) outcome.losers.push_back(seqs[i]);
  outcome.pending = std::make_shared<const LaneStep>(std::move(candidates[step->chosen]));
  ls.contrastive = std::move(step);
  return ls;
}

void Session::commit_contrastive(Lane& lane, const LaneStep& record,
                                 const ContrastiveOutcome& outcome) {
  if (outcome.winner_seq >= 0) {
    KvCacheManager& cache = engine_->cache();
    for (SeqId seq : outcome.losers) cache.release(seq);
    if (lane.seq >= 0) cache.release(lane.seq);
    lane.seq = outcome.winner_seq;
  }
  auto hidden = std::make_shared<std::vector<float>>(*lane.hidden);
  hidden->insert(hidden->end(), outcome.pending->hidden.begin(), outcome.pending->hidden.end());
  lane.hidden = std::move(hidden);
  lane.pending = outcome.pending;
  lane.generated.push_back(record.chosen_token);
  finish_lane_if_done(lane, record);
}

void Session::choose_first_contrastive(std::vector<Lane>& lanes, std::vector<LaneStep>& records,
                                       StepTrace& trace) {
  std::vector<DecodeRequest> requests;
  for (const Lane& lane : lanes) {
    if (!lane.contrastive()) continue;
    std::vector<DecodeRequest> r = candidate_requests(lane, records[lane.id]);
    requests.insert(requests.end(), std::make_move_iterator(r.begin()),
                    std::make_move_iterator(r.end()));
  }
  fork_candidates(requests, lanes);
  std::vector<LaneStep> chosen;
  std::vector<ContrastiveOutcome> outcomes;
  try {
    std::vector<LaneStep> candidates;
    const StepTrace run = forward_requests(requests, candidates);
    // The candidates' forward is part of the prefill step's cost.
    trace.seconds += run.seconds;
    trace.cost += run.cost;
    trace.recomputed_tokens += run.recomputed_tokens;
    for (size_t i = 0; i < requests.size();) {
      const int id = requests[i].lane;
      std::vector<LaneStep> group;
      std::vector<SeqId> seqs;
      for (; i < requests.size() && requests[i].lane == id; ++i) {
        group.push_back(std::move(candidates[i]));
        seqs.push_back(requests[i].seq);
      }
      outcomes.emplace_back();
      chosen.push_back(
          choose_contrastive(lanes[id], records[id], std::move(group), seqs, outcomes.back()));
    }
  } catch (...) {
    release_candidate_forks(requests, lanes);
    throw;
  }
  for (size_t i = 0; i < outcomes.size(); ++i) {
    LaneStep& record = records[outcomes[i].lane];
    record = std::move(chosen[i]);
    commit_contrastive(lanes[outcomes[i].lane], record, outcomes[i]);
  }
}

}  // namespace ts
