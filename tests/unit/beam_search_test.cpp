// Beam search: the pure scorer against exhaustive search and hand-checked HF
// rules, then beam lanes in the session against the same scorer fed by full
// forward passes, with the KV block pool checked after every run.
#include "sampling/beam_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "sampling/distribution.h"
#include "session/model_setup.h"
#include "session/session.h"
#include "session/session_export.h"
#include "test_models.h"
#include "test_paths.h"
#include "util/error.h"

namespace ts {
namespace {

// ------------------------------------------------------------ pure algorithm

// A deterministic synthetic model: the next-token log-softmax row of a prefix.
using Scorer = std::function<std::vector<float>(const std::vector<int>&)>;

Scorer synthetic_scorer(int vocab, uint64_t seed) {
  return [vocab, seed](const std::vector<int>& prefix) {
    uint64_t h = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int t : prefix) h = (h ^ static_cast<uint64_t>(t + 1)) * 0x100000001B3ull;
    std::vector<float> logits(vocab);
    for (int v = 0; v < vocab; ++v) {
      h = (h ^ static_cast<uint64_t>(v + 7)) * 0x100000001B3ull;
      h ^= h >> 29;
      logits[v] = static_cast<float>(h % 1000) / 250.0f;  // in [0, 4)
    }
    return log_softmax(logits);
  };
}

// The best hypothesis score over every sequence of at most max_len tokens,
// scored as HF does: an end of text ends it (its log-prob and length count),
// otherwise it runs to max_len.
double exhaustive_best(const Scorer& scorer, int vocab, const BeamSearchConfig& c) {
  double best = -INFINITY;
  std::function<void(std::vector<int>&, double)> walk = [&](std::vector<int>& prefix, double sum) {
    const std::vector<float> row = scorer(prefix);
    const int len = static_cast<int>(prefix.size()) + 1;
    for (int v = 0; v < vocab; ++v) {
      const double s = sum + row[v];
      if (v == c.eos_id || len == c.max_new_tokens) {
        best = std::max(best, s / std::pow(double(len), c.length_penalty));
        continue;
      }
      prefix.push_back(v);
      walk(prefix, s);
      prefix.pop_back();
    }
  };
  std::vector<int> prefix;
  walk(prefix, 0.0);
  return best;
}

std::vector<BeamHypothesis> run_beam_search(const Scorer& scorer, const BeamSearchConfig& c) {
  BeamSearchState s = beam_search_start();
  while (!s.done && s.steps < c.max_new_tokens) {
    std::vector<std::vector<float>> rows;
    for (const Beam& b : s.beams) rows.push_back(scorer(b.tokens));
    beam_search_step(s, rows, c);
  }
  return beam_search_finalize(s, c);
}

int power(int base, int exp) {
  int r = 1;
  for (int i = 0; i < exp; ++i) r *= base;
  return r;
}

TEST(BeamSearch, FindsTheExhaustiveOptimumWhenEveryPrefixFits) {
  for (int vocab : {3, 4}) {
    for (int depth : {3, 4}) {
      if (vocab == 4 && depth == 4) continue;  // 256 beams: slow for nothing
      for (float lp : {1.0f, 0.0f, 0.5f, 2.0f, -1.0f}) {
        for (uint64_t seed : {1u, 2u, 3u}) {
          const Scorer scorer = synthetic_scorer(vocab, seed);
          // No end of text: num_beams >= V^(L-1) keeps every prefix.
          BeamSearchConfig c;
          c.num_beams = power(vocab, depth - 1);
          c.length_penalty = lp;
          c.max_new_tokens = depth;
          c.eos_id = -1;
          std::vector<BeamHypothesis> got = run_beam_search(scorer, c);
          ASSERT_FALSE(got.empty());
          EXPECT_NEAR(got[0].score, exhaustive_best(scorer, vocab, c), 1e-9)
              << "V " << vocab << " L " << depth << " lp " << lp << " seed " << seed;
          // With an end of text, V^L beams keep every candidate in the top
          // num_beams, so no finished hypothesis is dropped either.
          c.eos_id = vocab - 1;
          c.num_beams = power(vocab, depth);
          got = run_beam_search(scorer, c);
          EXPECT_NEAR(got[0].score, exhaustive_best(scorer, vocab, c), 1e-9)
              << "eos, V " << vocab << " L " << depth << " lp " << lp << " seed " << seed;
          double sum = 0;
          for (float v : got[0].token_log_probs) sum += v;
          EXPECT_NEAR(sum, got[0].sum_log_prob, 1e-9);
        }
      }
    }
  }
}

std::vector<float> row_of(const std::vector<double>& probs) {
  std::vector<float> r;
  for (double p : probs) r.push_back(static_cast<float>(std::log(p)));
  return r;
}

TEST(BeamSearch, EndOfTextWithinTheTopBeamsFinishesAHypothesis) {
  BeamSearchConfig c;
  c.num_beams = 2;
  c.eos_id = 2;
  c.max_new_tokens = 10;
  BeamSearchState s = beam_search_start();
  // Step 1: a, b kept; the end of text (rank 2) is not needed.
  std::vector<BeamCandidate> cand = beam_search_step(s, {row_of({0.5, 0.3, 0.2})}, c);
  ASSERT_EQ(cand.size(), 3u);  // 2 * num_beams, but one beam of three tokens holds only 3
  EXPECT_EQ(cand[0].fate, CandidateFate::kKept);
  EXPECT_EQ(cand[1].fate, CandidateFate::kKept);
  EXPECT_EQ(cand[2].fate, CandidateFate::kPruned);
  ASSERT_EQ(s.beams.size(), 2u);
  EXPECT_EQ(s.beams[0].tokens, std::vector<int>{0});
  EXPECT_EQ(s.beams[1].tokens, std::vector<int>{1});
  EXPECT_TRUE(s.finished.empty());

  // Step 2: both beams prefer the end of text; both are within the top 2.
  const std::vector<float> row = row_of({0.1, 0.1, 0.8});
  cand = beam_search_step(s, {row, row}, c);
  ASSERT_EQ(cand.size(), 4u);
  EXPECT_EQ(cand[0].parent, 0);
  EXPECT_EQ(cand[0].token, 2);
  EXPECT_EQ(cand[0].fate, CandidateFate::kFinished);
  EXPECT_EQ(cand[1].parent, 1);
  EXPECT_EQ(cand[1].fate, CandidateFate::kFinished);
  EXPECT_EQ(cand[2].fate, CandidateFate::kKept);
  EXPECT_EQ(cand[2].new_beam, 0);
  EXPECT_EQ(cand[3].fate, CandidateFate::kKept);
  EXPECT_EQ(cand[3].token, 1);  // equal cumulative log-probs: the lower token first
  ASSERT_EQ(s.finished.size(), 2u);
  const double s0 = std::log(0.5f) + double(std::log(0.8f));
  const double s1 = std::log(0.3f) + double(std::log(0.8f));
  EXPECT_NEAR(s.finished[0].sum_log_prob, s0, 1e-6);
  EXPECT_NEAR(s.finished[0].score, s0 / 2, 1e-6);  // generated_len counts the end of text
  EXPECT_EQ(s.finished[0].tokens, std::vector<int>{0});
  EXPECT_TRUE(s.finished[0].ended_by_eos);
  EXPECT_NEAR(s.worst_finished_score, s1 / 2, 1e-6);
  // early_stopping=false: the best candidate (-0.92 / 2) could still beat the worst.
  EXPECT_FALSE(s.done);

  const std::vector<BeamHypothesis> ranked = beam_search_finalize(s, c);
  ASSERT_EQ(ranked.size(), 2u);  // the open beams (-3.0 / 2) do not beat -0.71
  EXPECT_NEAR(ranked[0].score, s0 / 2, 1e-6);
  EXPECT_NEAR(ranked[1].score, s1 / 2, 1e-6);
}

TEST(BeamSearch, EndOfTextOutsideTheTopBeamsIsDropped) {
  BeamSearchConfig c;
  c.num_beams = 2;
  c.eos_id = 2;
  BeamSearchState s;
  s.beams = {Beam{{0}, {0.0f}, 0.0}, Beam{{1}, {-5.0f}, -5.0}};
  s.steps = 1;
  const std::vector<BeamCandidate> cand =
      beam_search_step(s, {row_of({0.05, 0.04, 0.91}), row_of({0.4, 0.1, 0.5})}, c);
  // Ranks: (0,eos) (0,0) (0,1) (1,eos) ...: (0,1) fills the beams first.
  EXPECT_EQ(cand[0].fate, CandidateFate::kFinished);
  EXPECT_EQ(cand[1].fate, CandidateFate::kKept);
  EXPECT_EQ(cand[2].fate, CandidateFate::kKept);
  EXPECT_EQ(cand[3].fate, CandidateFate::kPruned);
  EXPECT_EQ(s.finished.size(), 1u);

  // An end of text ranked >= num_beams is dropped even while beams are missing.
  BeamSearchState t;
  t.beams = {Beam{{0}, {0.0f}, 0.0}, Beam{{1}, {-0.1f}, -0.1}};
  t.steps = 1;
  const std::vector<BeamCandidate> cand2 =
      beam_search_step(t, {row_of({0.6, 0.05, 0.35}), row_of({0.05, 0.05, 0.9})}, c);
  // Ranks: (1,eos) -0.21, (0,0) -0.51, (0,eos) -1.05, (0,1) -3.0 ...
  EXPECT_EQ(cand2[0].fate, CandidateFate::kFinished);
  EXPECT_EQ(cand2[1].fate, CandidateFate::kKept);
  EXPECT_EQ(cand2[2].token, 2);
  EXPECT_EQ(cand2[2].fate, CandidateFate::kPruned);
  EXPECT_EQ(cand2[3].fate, CandidateFate::kKept);
  EXPECT_EQ(t.beams.size(), 2u);
  EXPECT_EQ(t.finished.size(), 1u);
  EXPECT_EQ(t.finished[0].tokens, std::vector<int>{1});
}

TEST(BeamSearch, EarlyStoppingRules) {
  // Two finished hypotheses (worst score -1.2) and one weak open beam.
  auto state = [] {
    BeamSearchState s;
    s.beams = {Beam{{0}, {-5.0f}, -5.0}};
    s.steps = 1;
    for (double score : {-1.0, -1.2}) {
      BeamHypothesis h;
      h.score = score;
      s.finished.push_back(h);
    }
    s.worst_finished_score = -1.2;
    return s;
  };
  const std::vector<float> row = row_of({0.9, 0.05, 0.05});
  BeamSearchConfig c;
  c.num_beams = 2;
  c.eos_id = 2;
  c.max_new_tokens = 10;
  auto done_with = [&](EarlyStopping e, float lp) {
    BeamSearchConfig k = c;
    k.early_stopping = e;
    k.length_penalty = lp;
    BeamSearchState s = state();
    beam_search_step(s, {row}, k);
    return s.done;
  };
  // Best candidate: -5 + log 0.9 = -5.105 at length 2.
  EXPECT_TRUE(done_with(EarlyStopping::kTrue, 1.0f));
  EXPECT_TRUE(done_with(EarlyStopping::kFalse, 1.0f));   // -2.55 <= -1.2
  EXPECT_FALSE(done_with(EarlyStopping::kNever, 1.0f));  // -5.105 / 10 = -0.51 > -1.2
  EXPECT_TRUE(done_with(EarlyStopping::kNever, -1.0f));  // lp <= 0: at the current length
  // Fewer finished hypotheses than beams: never done.
  BeamSearchState s = state();
  s.finished.pop_back();
  s.worst_finished_score = -1.0;
  BeamSearchConfig k = c;
  k.early_stopping = EarlyStopping::kTrue;
  beam_search_step(s, {row}, k);
  EXPECT_FALSE(s.done);
  ASSERT_EQ(s.beams.size(), 2u);
  EXPECT_THROW(beam_search_step(s, {row}, k), Error);  // one row for two beams
}

TEST(BeamSearch, FinalizeAddsOpenBeamsUnlessDone) {
  BeamSearchConfig c;
  c.num_beams = 2;
  c.eos_id = -1;
  c.length_penalty = 1.0f;
  BeamSearchState s = beam_search_start();
  beam_search_step(s, {row_of({0.7, 0.2, 0.1})}, c);
  const std::vector<BeamHypothesis> r = beam_search_finalize(s, c);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].tokens, std::vector<int>{0});
  EXPECT_NEAR(r[0].score, std::log(0.7f), 1e-6);
  EXPECT_FALSE(r[0].ended_by_eos);
  s.done = true;
  EXPECT_TRUE(beam_search_finalize(s, c).empty());
  EXPECT_THROW(beam_search_step(s, {row_of({0.7, 0.2, 0.1})}, c), Error);
}

// ------------------------------------------------------------ beam lanes

LoadedModel tiny() { return test::load_tiny(); }

SamplingParams beams(int n, float lp = 1.0f, EarlyStopping e = EarlyStopping::kFalse) {
  SamplingParams p;
  p.num_beams = n;
  p.length_penalty = lp;
  p.early_stopping = e;
  return p;
}

// Log-softmax of the next token after `context`, by a full forward pass.
std::vector<float> full_forward_row(Engine& engine, const std::vector<int>& context) {
  return log_softmax(engine.forward_scratch(context, ForwardOptions{}).outputs[0].logits);
}

constexpr const char* kPrompt = "The cat sat on the mat and";

TEST(BeamLane, CumulativeLogProbsEqualFullForwardPasses) {
  LoadedModel m = tiny();
  SessionOptions o;
  o.max_new_tokens = 6;
  Session s(m.tokenizer, m.engine, o);
  s.set_strategies({beams(4)});
  s.set_prompt(kPrompt);
  s.run(100);
  ASSERT_EQ(s.state(), SessionState::kFinished);
  const std::vector<int> prompt = s.prompt_ids();
  auto sequence_log_prob = [&](const std::vector<int>& tokens) {
    double sum = 0;
    std::vector<int> context = prompt;
    for (int t : tokens) {
      sum += full_forward_row(*m.engine, context)[t];
      context.push_back(t);
    }
    return sum;
  };
  int checked = 0;
  for (const StepTracePtr& step : s.history()) {
    const LaneStep& ls = step->lanes.at(0);
    ASSERT_TRUE(ls.beam);
    const BeamStep& b = *ls.beam;
    for (const BeamCandidate& c : b.candidates) {
      std::vector<int> tokens = b.before->beams[c.parent].tokens;
      tokens.push_back(c.token);
      EXPECT_NEAR(c.sum_log_prob, sequence_log_prob(tokens), 1e-4);
      ++checked;
    }
    for (const Beam& beam : b.after->beams)
      EXPECT_NEAR(beam.sum_log_prob, sequence_log_prob(beam.tokens), 1e-4);
    // The lane's record is the beam the new best beam extends.
    EXPECT_EQ(ls.chosen_token, b.after->beams[0].tokens.back());
  }
  EXPECT_EQ(checked, 6 * 8);
  EXPECT_EQ(s.lanes()[0].stop_reason, "token limit (6)");
  // The JSON export carries the tree.
  const nlohmann::json j = session_to_json(s);
  EXPECT_EQ(j["lanes"][0]["strategy"], "beams=4");
  EXPECT_EQ(j["steps"][2]["lanes"][0]["beam"]["candidates"].size(), 8u);
  EXPECT_EQ(j["steps"][2]["lanes"][0]["beam"]["beams"].size(),
            s.history()[2]->lanes[0].beam->after->beams.size());
  EXPECT_EQ(j["steps"][5]["lanes"][0]["beam"]["final"][0]["tokens"].size() +
                j["steps"][5]["lanes"][0]["beam"]["final"][0]["ended_by_eos"].get<bool>(),
            s.lanes()[0].generated.size());
}

TEST(BeamLane, FindsTheExhaustiveOptimumOfTwoTokens) {
  LoadedModel m = tiny();
  SessionOptions o;
  o.max_new_tokens = 2;
  Session s(m.tokenizer, m.engine, o);
  s.set_strategies({beams(8)});
  s.set_prompt(kPrompt);
  s.run(100);
  const std::vector<int> prompt = s.prompt_ids();
  const int eos = m.tokenizer->eot_id();
  // Every sequence of at most two tokens, by full forward passes: an end of
  // text first ends it at length 1; lp = 1 divides by the length.
  const std::vector<float> first = full_forward_row(*m.engine, prompt);
  double best = first[eos] / 1.0;
  int best_first = eos;
  for (int a = 0; a < static_cast<int>(first.size()); ++a) {
    if (a == eos) continue;
    std::vector<int> context = prompt;
    context.push_back(a);
    const std::vector<float> second = full_forward_row(*m.engine, context);
    const double top = *std::max_element(second.begin(), second.end());
    if ((first[a] + top) / 2.0 > best) best = (first[a] + top) / 2.0, best_first = a;
  }
  const BeamStep& last = *s.history().back()->lanes[0].beam;
  ASSERT_FALSE(last.final.empty());
  EXPECT_LE(last.final[0].score, best + 1e-5);
  // Beam search must find it when its first token survived the first step
  // (then it is the best candidate of the second): check that it did.
  const BeamStep& step1 = *s.history()[0]->lanes[0].beam;
  const bool survived =
      std::any_of(step1.candidates.begin(), step1.candidates.end(), [&](const BeamCandidate& c) {
        return c.token == best_first && c.fate != CandidateFate::kPruned;
      });
  ASSERT_TRUE(survived);
  EXPECT_NEAR(last.final[0].score, best, 1e-5);
}

// The same search with every row computed by a full forward pass: what the
// session's forked, batched, cached beams must reproduce.
std::vector<BeamHypothesis> reference_beam_search(Engine& engine, const std::vector<int>& prompt,
                                                  const BeamSearchConfig& c) {
  return run_beam_search(
      [&](const std::vector<int>& tokens) {
        std::vector<int> context = prompt;
        context.insert(context.end(), tokens.begin(), tokens.end());
        return full_forward_row(engine, context);
      },
      c);
}

TEST(BeamLane, MatchesTheScorerFedByFullForwardPassesAndFreesItsBlocks) {
  LoadedModel m = tiny();
  KvCacheManager& cache = m.engine->cache();
  const int free_at_start = cache.free_blocks();
  for (const SamplingParams& p : {beams(2), beams(4, 0.5f), beams(8, 1.0f, EarlyStopping::kTrue),
                                  beams(3, 2.0f, EarlyStopping::kNever)}) {
    SessionOptions o;
    o.max_new_tokens = 8;
    auto s = std::make_unique<Session>(m.tokenizer, m.engine, o);
    // Beside a greedy lane: one batched forward serves both.
    s->set_strategies({SamplingParams{}, p});
    s->set_prompt(kPrompt);
    s->run(100);
    BeamSearchConfig c;
    c.num_beams = p.num_beams;
    c.length_penalty = p.length_penalty;
    c.early_stopping = p.early_stopping;
    c.max_new_tokens = 8;
    c.eos_id = m.tokenizer->eot_id();
    const std::vector<BeamHypothesis> want = reference_beam_search(*m.engine, s->prompt_ids(), c);
    const BeamStep& last = *s->history().back()->lanes.back().beam;
    ASSERT_EQ(last.final.size(), want.size()) << format_strategy(p);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(last.final[i].tokens, want[i].tokens) << format_strategy(p) << " #" << i;
      EXPECT_NEAR(last.final[i].score, want[i].score, 1e-4);
    }
    std::vector<int> output = want[0].tokens;
    if (want[0].ended_by_eos) output.push_back(c.eos_id);
    EXPECT_EQ(s->lanes()[1].generated, output);
    cache.check_invariants();
    // Only the live beams hold blocks: each open beam's sequence, shared.
    EXPECT_EQ(static_cast<int>(s->lanes()[1].beam_seqs.size()),
              static_cast<int>(s->lanes()[1].beams->beams.size()));
    s.reset();
    cache.check_invariants();
    EXPECT_EQ(cache.free_blocks(), free_at_start);
  }
}

std::vector<int> sorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(BeamLane, BackRestoresPrunedBeamsExactly) {
  LoadedModel m = tiny();
  KvCacheManager& cache = m.engine->cache();
  SessionOptions o;
  o.max_new_tokens = 12;
  Session s(m.tokenizer, m.engine, o);
  s.set_strategies({beams(4)});
  s.set_prompt(kPrompt);
  s.prefill();
  const KvOccupancy after_prefill = cache.occupancy();
  s.run(8);
  std::vector<StepTracePtr> history = s.history();
  const KvOccupancy at_end = cache.occupancy();
  // Some beam was pruned with all its candidates: back has to rebuild it.
  int pruned_beams = 0;
  for (const StepTracePtr& step : history) {
    const BeamStep& b = *step->lanes[0].beam;
    for (size_t parent = 0; parent < b.before->beams.size(); ++parent)
      pruned_beams += std::none_of(b.candidates.begin(), b.candidates.end(), [&](auto& c) {
        return c.parent == static_cast<int>(parent) && c.fate == CandidateFate::kKept;
      });
  }
  EXPECT_GT(pruned_beams, 0);
  for (int i = 0; i < 8; ++i) {
    s.back();
    cache.check_invariants();
  }
  // Rebuilt beams share their blocks again: as many as right after prefill.
  EXPECT_EQ(cache.occupancy().blocks_used, after_prefill.blocks_used);
  EXPECT_EQ(sorted(cache.occupancy().ref_counts), sorted(after_prefill.ref_counts));
  EXPECT_EQ(s.history().size(), 1u);
  // Stepping again gives the same beams and the same logits (pruned beams'
  // caches were rebuilt bit for bit).
  s.run(8);
  ASSERT_EQ(s.history().size(), history.size());
  for (size_t i = 1; i < history.size(); ++i) {
    const LaneStep& a = history[i]->lanes[0];
    const LaneStep& b = s.history()[i]->lanes[0];
    EXPECT_EQ(a.logits, b.logits) << "step " << i;
    ASSERT_EQ(a.beam->candidates.size(), b.beam->candidates.size());
    for (size_t k = 0; k < a.beam->candidates.size(); ++k) {
      EXPECT_EQ(a.beam->candidates[k].token, b.beam->candidates[k].token);
      EXPECT_EQ(a.beam->candidates[k].sum_log_prob, b.beam->candidates[k].sum_log_prob);
    }
  }
  EXPECT_EQ(cache.occupancy().blocks_used, at_end.blocks_used);
  s.reset();
  EXPECT_EQ(cache.free_blocks(), cache.shape().num_blocks);
}

TEST(BeamLane, CacheOffGivesTheSameBeams) {
  LoadedModel m = tiny();
  SessionOptions on;
  on.max_new_tokens = 6;
  SessionOptions off = on;
  off.kv_cache = false;
  Session a(m.tokenizer, m.engine, on);
  Session b(m.tokenizer, m.engine, off);
  for (Session* s : {&a, &b}) {
    s->set_strategies({beams(4)});
    s->set_prompt(kPrompt);
    s->run(100);
  }
  EXPECT_EQ(a.lanes()[0].generated, b.lanes()[0].generated);
  b.back();
  b.back();
  b.run(100);
  EXPECT_EQ(a.lanes()[0].generated, b.lanes()[0].generated);
}

TEST(BeamLane, RefusedCommandsKeepTheSession) {
  LoadedModel m = tiny();
  Session s(m.tokenizer, m.engine);
  EXPECT_THROW(s.set_strategies({beams(9)}), Error);
  s.set_strategies({beams(3), SamplingParams{}});
  s.set_prompt(kPrompt);
  s.run(3);
  const std::vector<int> tokens = s.lanes()[0].generated;
  SamplingParams hot;
  hot.do_sample = true;
  EXPECT_THROW(s.rechoose(0, hot), Error);
  EXPECT_THROW(s.rechoose(1, beams(2)), Error);
  EXPECT_THROW(s.branch(1, 0, 5), Error);  // beam lanes cannot be branched
  EXPECT_EQ(s.lanes()[0].generated, tokens);
  EXPECT_EQ(s.history().size(), 3u);
}

}  // namespace
}  // namespace ts
