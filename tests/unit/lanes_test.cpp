// Branching, per-lane back and closing lanes: what a branched lane computes,
// how its history falls back to its parent's, refused commands, and the KV
// block pool after random sequences of every lane command.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "sampling/distribution.h"
#include "session/lane_summary.h"
#include "session/model_setup.h"
#include "session/session.h"
#include "session/session_worker.h"
#include "test_models.h"
#include "test_paths.h"
#include "util/error.h"

namespace ts {
namespace {

using test::sampled;

LoadedModel tiny() { return test::load_tiny(40); }  // up to 8 lanes, some of them beams

SamplingParams beams(int n) {
  SamplingParams p;
  p.num_beams = n;
  return p;
}

constexpr const char* kPrompt = "The quick brown fox jumps over the lazy dog";

// A token other than `not_this`, for a branch that really differs.
int other_token(int not_this) { return not_this == 7 ? 8 : 7; }

// Every sequence in the cache belongs to exactly one open lane (or beam),
// and holds that lane's tokens but the pending one.
void expect_pool_matches_lanes(const Session& s, const KvCacheManager& cache) {
  cache.check_invariants();
  std::vector<SeqId> held;
  const int t = static_cast<int>(s.prompt_tokens().size());
  for (const Lane& lane : s.lanes()) {
    if (lane.closed) continue;
    if (lane.beam_search()) {
      ASSERT_EQ(lane.beam_seqs.size(), lane.beams->beams.size());
      for (size_t b = 0; b < lane.beam_seqs.size(); ++b) {
        held.push_back(lane.beam_seqs[b]);
        EXPECT_EQ(cache.length(lane.beam_seqs[b]),
                  t + static_cast<int>(lane.beams->beams[b].tokens.size()) - 1);
      }
    } else {
      held.push_back(lane.seq);
      EXPECT_EQ(cache.length(lane.seq), t + static_cast<int>(lane.generated.size()) - 1)
          << "lane " << lane.id;
    }
  }
  std::sort(held.begin(), held.end());
  EXPECT_EQ(held, cache.sequences());
}

TEST(Branch, ForksTheCacheAndComputesWhatAFreshSequenceWould) {
  LoadedModel m = tiny();
  Session s(m.tokenizer, m.engine);
  s.set_prompt(kPrompt);
  s.run(7);  // prefill + 6 decode steps
  const int t = static_cast<int>(s.prompt_tokens().size());
  const StepTrace& at3 = *s.history()[3];
  const int token = other_token(at3.lanes[0].chosen_token);
  const size_t steps = s.history().size();
  const int id = s.branch(3, 0, token);
  EXPECT_EQ(id, 1);
  EXPECT_EQ(s.history().size(), steps);  // nothing computed
  const Lane& b = s.lanes()[1];
  EXPECT_EQ(b.parent, 0);
  EXPECT_EQ(b.branch_step, 3);
  EXPECT_EQ(b.first_step, 7);
  std::vector<int> expected(s.lanes()[0].generated.begin(), s.lanes()[0].generated.begin() + 3);
  expected.push_back(token);
  EXPECT_EQ(b.generated, expected);
  // The fork holds the step's inputs: the prompt and the first 3 tokens.
  EXPECT_EQ(m.engine->cache().length(b.seq), t + 3);
  EXPECT_GT(m.engine->cache().occupancy().blocks_shared, 0);
  // History: the parent's records before the branch, the branch's own choice
  // at it, nothing until its first own step.
  for (int step = 0; step < 3; ++step) EXPECT_EQ(s.record(step, 1), s.record(step, 0));
  ASSERT_NE(s.record(3, 1), nullptr);
  EXPECT_EQ(s.record(3, 1)->chosen_token, token);
  EXPECT_EQ(s.record(3, 1)->logits, s.record(3, 0)->logits);
  EXPECT_EQ(s.record(4, 1), nullptr);
  EXPECT_EQ(s.attention(2, 1, 0), s.attention(2, 0, 0));

  s.run(4);
  ASSERT_EQ(s.lanes()[1].generated.size(), 8u);
  // Every own record equals a fresh full forward pass of the same tokens.
  LoadedModel fresh = tiny();
  for (int step = 7; step < 11; ++step) {
    const LaneStep* r = s.record(step, 1);
    ASSERT_NE(r, nullptr) << step;
    EXPECT_EQ(r->step_index, step - 3);
    const std::vector<float> want =
        fresh.engine->forward_scratch(r->context_ids, ForwardOptions{}).outputs[0].logits;
    ASSERT_EQ(want.size(), r->logits.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(r->logits[i], want[i], 1e-5f);
  }
  EXPECT_EQ(std::vector<int>(s.record(8, 1)->context_ids.begin() + t,
                             s.record(8, 1)->context_ids.begin() + t + 4),
            expected);
}

TEST(Branch, SampledBranchKeepsTheSeedStream) {
  LoadedModel m = tiny();
  Session s(m.tokenizer, m.engine);
  s.set_strategies({sampled(1.2f, 5)});
  s.set_prompt(kPrompt);
  s.run(6);
  // Branching with the token that was chosen anyway reproduces the lane.
  s.branch(2, 0, s.lanes()[0].generated[2]);
  s.run(3);
  EXPECT_EQ(s.lanes()[1].generated,
            std::vector<int>(s.lanes()[0].generated.begin(), s.lanes()[0].generated.begin() + 6));
}

TEST(Branch, BackUndoesBranchesMadeAfterTheLastStep) {
  LoadedModel m = tiny();
  KvCacheManager& cache = m.engine->cache();
  Session s(m.tokenizer, m.engine);
  s.set_prompt(kPrompt);
  s.run(4);
  s.branch(1, 0, 9);
  // Branches of that branch before its first own step: at its branch step,
  // and before it (through lane 0's records).
  s.branch(1, 1, 10);
  s.branch(0, 1, 11);
  EXPECT_THROW(s.branch(2, 1, 12), Error);  // lane 1 did not exist at step 2
  ASSERT_EQ(s.lanes().size(), 4u);
  EXPECT_EQ(s.record(0, 2), s.record(0, 0));
  EXPECT_EQ(s.record(1, 2)->chosen_token, 10);
  EXPECT_EQ(s.lanes()[2].generated, (std::vector<int>{s.lanes()[0].generated[0], 10}));
  EXPECT_EQ(s.lanes()[3].generated, std::vector<int>{11});
  s.step();
  expect_pool_matches_lanes(s, cache);
  s.back();  // the new step only
  EXPECT_EQ(s.lanes().size(), 4u);
  s.back();  // the step before the branches: they go with it
  EXPECT_EQ(s.lanes().size(), 1u);
  expect_pool_matches_lanes(s, cache);  // lane 0's sequence alone
  const int block = cache.shape().block_size;
  EXPECT_EQ(cache.occupancy().blocks_used, (cache.length(s.lanes()[0].seq) + block - 1) / block);
}

TEST(BackLane, UndoesOneLaneOnly) {
  LoadedModel m = tiny();
  Session s(m.tokenizer, m.engine);
  s.set_strategies({SamplingParams{}, sampled(0.9f, 2), beams(3)});
  s.set_prompt(kPrompt);
  s.run(5);
  const std::vector<int> lane0 = s.lanes()[0].generated;
  const std::vector<int> lane2 = s.lanes()[2].generated;
  const std::vector<int> lane1 = s.lanes()[1].generated;
  const StepTracePtr last = s.history().back();
  s.back_lane(1);
  EXPECT_EQ(s.lanes()[0].generated, lane0);
  EXPECT_EQ(s.lanes()[2].generated, lane2);
  EXPECT_EQ(s.lanes()[1].generated, std::vector<int>(lane1.begin(), lane1.end() - 1));
  EXPECT_EQ(s.history().size(), 5u);
  EXPECT_EQ(s.history().back()->lanes.size(), 2u);  // lane 1's record left the last step
  EXPECT_EQ(s.record(4, 1), nullptr);
  s.back_lane(2);  // a beam lane: its beams as they were
  EXPECT_EQ(s.lanes()[2].beams, s.history()[3]->lanes[2].beam->after);
  m.engine->cache().check_invariants();
  // The next step brings both back to where they were.
  s.step();
  EXPECT_EQ(s.lanes()[1].generated, lane1);
  EXPECT_EQ(s.lanes()[2].generated, lane2);
  EXPECT_EQ(s.history().back()->lanes.size(), 3u);
  const std::vector<float>& again = s.history().back()->lanes[1].logits;
  ASSERT_EQ(again.size(), last->lanes[1].logits.size());
  for (size_t i = 0; i < again.size(); ++i) ASSERT_NEAR(again[i], last->lanes[1].logits[i], 1e-5f);
}

TEST(Lanes, RefusedCommandsSayWhyAndChangeNothing) {
  LoadedModel m = tiny();
  Session s(m.tokenizer, m.engine);
  EXPECT_THROW(s.branch(0, 0, 1), Error);  // no prefill yet
  s.set_prompt(kPrompt);
  s.run(3);
  auto expect_refused = [&](const std::function<void()>& fn, const std::string& needle) {
    const std::vector<StepTracePtr> history = s.history();
    const std::vector<Lane> lanes = s.lanes();
    const KvOccupancy kv = m.engine->cache().occupancy();
    try {
      fn();
      ADD_FAILURE() << "expected an error about " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
    EXPECT_EQ(s.history(), history);
    ASSERT_EQ(s.lanes().size(), lanes.size());
    for (size_t i = 0; i < lanes.size(); ++i) EXPECT_EQ(s.lanes()[i].generated, lanes[i].generated);
    EXPECT_EQ(m.engine->cache().occupancy().ref_counts, kv.ref_counts);
  };
  expect_refused([&] { s.branch(3, 0, 1); }, "no step 3");
  expect_refused([&] { s.branch(-1, 0, 1); }, "no step -1");
  expect_refused([&] { s.branch(1, 4, 1); }, "no lane 4");
  expect_refused([&] { s.branch(1, 0, 457); }, "vocabulary");
  s.step();
  for (int i = 1; i < kMaxLanes; ++i) s.branch(1, 0, i);
  EXPECT_EQ(s.open_lanes(), kMaxLanes);
  expect_refused([&] { s.branch(1, 0, 20); }, "8 open lanes");
  expect_refused([&] { s.back_lane(3); }, "just branched");
  s.back_lane(0);  // steps 3 and 2 are lane 0's alone
  s.back_lane(0);
  expect_refused([&] { s.back_lane(0); }, "branched from lane 0 at step 1");
  s.close_lane(7);
  expect_refused([&] { s.close_lane(7); }, "already closed");
  expect_refused([&] { s.branch(1, 7, 3); }, "closed");
  expect_refused([&] { s.back_lane(7); }, "closed");
  for (int i = 1; i < 7; ++i) s.close_lane(i);
  expect_refused([&] { s.close_lane(0); }, "only open lane");
  EXPECT_EQ(s.open_lanes(), 1);
  s.branch(0, 0, 30);  // closed lanes free their places
  EXPECT_EQ(s.lanes().size(), 9u);
}

TEST(Lanes, RandomCommandsLeaveThePoolExact) {
  LoadedModel m = tiny();
  KvCacheManager& cache = m.engine->cache();
  const int free_at_start = cache.free_blocks();
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    SessionOptions o;
    o.max_new_tokens = 12;
    auto s = std::make_unique<Session>(m.tokenizer, m.engine, o);
    s->set_strategies({SamplingParams{}, sampled(1.0f, seed), beams(3)});
    s->set_prompt(kPrompt);
    s->prefill();
    int refused = 0;
    for (int op = 0; op < 120; ++op) {
      const int lanes = static_cast<int>(s->lanes().size());
      const int steps = static_cast<int>(s->history().size());
      auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
      const std::vector<StepTracePtr> history = s->history();
      std::vector<std::vector<int>> generated;
      for (const Lane& lane : s->lanes()) generated.push_back(lane.generated);
      try {
        switch (pick(6)) {
          case 0:
          case 1:
            s->step();
            break;
          case 2:
            if (steps > 1) s->back();
            break;
          case 3:
            s->branch(pick(steps), pick(lanes), pick(457));
            break;
          case 4:
            s->back_lane(pick(lanes));
            break;
          case 5:
            s->close_lane(pick(lanes));
            break;
        }
      } catch (const Error&) {
        ++refused;  // e.g. branching a beam lane, stepping a finished session
        EXPECT_EQ(s->history(), history);
        ASSERT_EQ(s->lanes().size(), generated.size());
        for (size_t i = 0; i < generated.size(); ++i)
          EXPECT_EQ(s->lanes()[i].generated, generated[i]);
      }
      expect_pool_matches_lanes(*s, cache);
      if (HasFailure()) FAIL() << "seed " << seed << " op " << op;
    }
    EXPECT_GT(s->lanes().size(), 3u) << "some branches were made";
    EXPECT_GT(refused, 0);
    s.reset();
    cache.check_invariants();
    EXPECT_EQ(cache.free_blocks(), free_at_start);
    EXPECT_TRUE(cache.sequences().empty());
  }
}

TEST(LaneSummary, HandCheckedValues) {
  EXPECT_DOUBLE_EQ(distinct_ngram_ratio({1, 2, 1, 2}, 1), 0.5);        // {1, 2} of 4
  EXPECT_DOUBLE_EQ(distinct_ngram_ratio({1, 2, 1, 2}, 2), 2.0 / 3.0);  // 12 21 12
  EXPECT_DOUBLE_EQ(distinct_ngram_ratio({1, 2, 1, 2}, 3), 1.0);        // 121 212
  EXPECT_DOUBLE_EQ(distinct_ngram_ratio({5, 5, 5, 5, 5}, 2), 0.25);
  EXPECT_TRUE(std::isnan(distinct_ngram_ratio({1, 2}, 3)));

  const LaneSummary s = summarize_tokens({4, 4}, {std::log(0.5), std::log(0.25)}, 0.5);
  EXPECT_NEAR(s.log_prob, std::log(0.125), 1e-12);
  EXPECT_NEAR(s.perplexity, std::sqrt(8.0), 1e-12);  // exp(ln 8 / 2)
  EXPECT_DOUBLE_EQ(s.distinct[0], 0.5);
  EXPECT_DOUBLE_EQ(s.distinct[1], 1.0);
  EXPECT_TRUE(std::isnan(s.distinct[2]));
  EXPECT_DOUBLE_EQ(s.tokens_per_second, 4.0);
  EXPECT_THROW(summarize_tokens({1}, {}, 1.0), Error);
}

TEST(LaneSummary, OfSessionLanes) {
  LoadedModel m = tiny();
  SessionOptions o;
  o.max_new_tokens = 6;
  Session s(m.tokenizer, m.engine, o);
  s.set_strategies({SamplingParams{}, beams(3)});
  s.set_prompt(kPrompt);
  s.run(100);
  s.branch(2, 0, 9);
  s.run(100);
  double all_seconds = 0;
  for (const StepTracePtr& t : s.history()) all_seconds += t->seconds;

  const LaneSummary greedy = summarize_lane(s, 0);
  double log_prob = 0;
  for (int step = 0; step < 6; ++step) {
    const LaneStep& r = s.history()[step]->lanes[0];
    log_prob += log_softmax(r.logits)[r.chosen_token];
  }
  EXPECT_EQ(greedy.tokens, 6);
  EXPECT_NEAR(greedy.log_prob, log_prob, 1e-9);
  EXPECT_NEAR(greedy.perplexity, std::exp(-log_prob / 6), 1e-9);
  EXPECT_GT(greedy.tokens_per_second, 0.0);
  EXPECT_LE(greedy.seconds, all_seconds);

  const LaneSummary beam = summarize_lane(s, 1);
  const BeamStep& last = *s.history()[5]->lanes[1].beam;
  ASSERT_FALSE(last.final.empty());
  EXPECT_NEAR(beam.log_prob, last.final[0].sum_log_prob, 1e-5);

  // The branch: its parent's first two tokens, then its own.
  const LaneSummary branch = summarize_lane(s, 2);
  EXPECT_EQ(branch.tokens, 6);
  double branch_log_prob = 0;
  for (int step = 0; step < static_cast<int>(s.history().size()); ++step)
    if (const LaneStep* r = s.record(step, 2))
      branch_log_prob += log_softmax(r->logits)[r->chosen_token];
  EXPECT_NEAR(branch.log_prob, branch_log_prob, 1e-9);
  EXPECT_THROW(summarize_lane(s, 3), Error);
}

TEST(SessionWorker, BranchBackLaneAndCloseLaneCommands) {
  LoadedModel m = tiny();
  SessionWorker w(std::make_unique<Session>(m.tokenizer, m.engine), "tiny");
  w.set_prompt(kPrompt);
  w.prefill();
  w.step();
  w.step();
  w.branch(1, 0, 5);
  w.step();
  w.wait_idle();
  SnapshotPtr s = w.snapshot();
  ASSERT_EQ(s->lanes.size(), 2u);
  EXPECT_EQ(s->lanes[1].parent, 0);
  EXPECT_EQ(s->lanes[1].generated.size(), 3u);
  // Its record at the branch step is the parent's: the snapshot serves it at once.
  std::vector<float> att;
  EXPECT_TRUE(w.attention(1, 1, 0, att));
  EXPECT_EQ(att, *lane_record(s->history, s->lanes, 1, 0)->attention[0]);
  w.back_lane(1);
  w.close_lane(1);
  w.wait_idle();
  s = w.snapshot();
  EXPECT_TRUE(s->last_error.empty()) << s->last_error;
  EXPECT_TRUE(s->lanes[1].closed);
  EXPECT_EQ(s->lanes[1].generated.size(), 2u);
  w.close_lane(0);  // the only open lane: refused
  w.wait_idle();
  EXPECT_NE(w.snapshot()->last_error.find("only open lane"), std::string::npos);
}

}  // namespace
}  // namespace ts
