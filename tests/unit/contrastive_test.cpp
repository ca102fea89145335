// Contrastive search: the engine's last-layer hidden states, the ranking
// arithmetic, the session's contrastive lanes against an independent PyTorch
// reference (tools/reference/contrastive_reference.py, full forward passes,
// no KV cache), alpha = 0 against greedy, the KV block pool through back,
// reset, branch and close, and refused input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sampling/banned_words.h"
#include "sampling/contrastive.h"
#include "sampling/distribution.h"
#include "sampling/sampling_params.h"
#include "session/model_setup.h"
#include "session/session.h"
#include "test_models.h"
#include "test_paths.h"
#include "util/error.h"

namespace ts {
namespace {

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

std::filesystem::path bundled_dir() {
  return std::filesystem::path(TS_SOURCE_DIR) / "assets/models/tokenscope-tiny";
}

LoadedModel bundled() { return test::load_model(bundled_dir(), "cpu", 12); }

SamplingParams contrastive(int k, float alpha) {
  SamplingParams p;
  p.contrastive_k = k;
  p.penalty_alpha = alpha;
  return p;
}

std::unique_ptr<Session> make_session(const LoadedModel& m, const std::string& prompt,
                                      const std::vector<SamplingParams>& lanes, int max_new = 64) {
  SessionOptions o;
  o.max_new_tokens = max_new;
  auto s = std::make_unique<Session>(m.tokenizer, m.engine, o);
  s->set_prompt(prompt);
  s->set_strategies(lanes);
  return s;
}

// Every sequence in the cache belongs to one open lane; a contrastive lane's
// sequence caches all its tokens (its last one ran as a candidate), any
// other lane's all but the last.
void expect_pool_exact(const Session& s) {
  const KvCacheManager& cache = s.engine().cache();
  cache.check_invariants();
  std::vector<SeqId> held;
  const int t = static_cast<int>(s.prompt_tokens().size());
  for (const Lane& lane : s.lanes()) {
    if (lane.closed) continue;
    held.push_back(lane.seq);
    const int cached = t + static_cast<int>(lane.generated.size()) - (lane.contrastive() ? 0 : 1);
    EXPECT_EQ(cache.length(lane.seq), cached) << "lane " << lane.id;
    if (lane.contrastive()) {
      ASSERT_TRUE(lane.hidden);
      EXPECT_EQ(static_cast<int>(lane.hidden->size()), cached * s.engine().config().n_embd);
    }
  }
  std::sort(held.begin(), held.end());
  EXPECT_EQ(held, cache.sequences());
}

// ---- engine ----

TEST(HiddenStates, PrefillRowsAreLnFAndGiveTheLogits) {
  LoadedModel m = test::load_tiny();
  const ModelConfig& cfg = m.engine->config();
  const std::vector<int> ids = m.tokenizer->encode_ids("The cat sat on the mat.");
  ForwardOptions o;
  o.record_hidden = true;
  o.all_logits = true;
  ForwardResult r = m.engine->forward_scratch(ids, o);
  const EntryOutput& out = r.outputs[0];
  const int c = cfg.n_embd, v = cfg.vocab_size;
  ASSERT_EQ(out.hidden.size(), ids.size() * c);
  // logits = hidden . wte^T row by row: the state is the one the head reads.
  for (size_t row = 0; row < ids.size(); ++row)
    for (int tok = 0; tok < v; tok += 37) {
      double dot = 0;
      for (int j = 0; j < c; ++j)
        dot += static_cast<double>(out.hidden[row * c + j]) *
               m.engine->weights().wte[size_t(tok) * c + j];
      EXPECT_NEAR(dot, out.logits[row * v + tok], 1e-3) << "row " << row << " token " << tok;
    }
  // Off by default: no copy for the steps that do not ask.
  ForwardResult plain = m.engine->forward_scratch(ids, {});
  EXPECT_TRUE(plain.outputs[0].hidden.empty());
}

TEST(HiddenStates, DecodeRowEqualsThePrefillRow) {
  LoadedModel m = test::load_tiny();
  const int c = m.engine->config().n_embd;
  const std::vector<int> ids = m.tokenizer->encode_ids("The cat sat on the mat.");
  ForwardOptions o;
  o.record_hidden = true;
  ForwardResult full = m.engine->forward_scratch(ids, o);
  KvCacheManager& cache = m.engine->cache();
  const SeqId seq = cache.create();
  m.engine->forward({ForwardRequest{seq, std::vector<int>(ids.begin(), ids.end() - 1)}}, o);
  ForwardResult step = m.engine->forward({ForwardRequest{seq, {ids.back()}}}, o);
  cache.release(seq);
  ASSERT_EQ(step.outputs[0].hidden.size(), static_cast<size_t>(c));
  for (int j = 0; j < c; ++j)
    EXPECT_EQ(step.outputs[0].hidden[j], full.outputs[0].hidden[(ids.size() - 1) * c + j]);
  // The uncached decode returns the last row only, the same numbers.
  ForwardResult naive = m.engine->forward_uncached(ids, o);
  ASSERT_EQ(naive.outputs[0].hidden.size(), static_cast<size_t>(c));
  for (int j = 0; j < c; ++j) EXPECT_EQ(naive.outputs[0].hidden[j], step.outputs[0].hidden[j]);
}

// ---- ranking ----

TEST(ContrastiveRank, PenaltyIsTheLargestCosineAndTiesGoToTheMoreProbable) {
  // Two earlier positions in 2-D, three candidates.
  const std::vector<float> history = {1, 0, 0, 2};
  const std::vector<float> probs = {0.1f, 0.4f, 0.4f, 0.1f};
  const float a[2] = {3, 0};   // parallel to position 0: cosine 1
  const float b[2] = {1, 1};   // 45 degrees to both: cosine 0.7071 at position 0 (first max)
  const float d[2] = {-1, 1};  // cosine 0.7071 with position 1 only
  ContrastiveStep s = contrastive_rank(probs, {1, 2, 3}, history, {a, b, d}, 2, 0.5f);
  ASSERT_EQ(s.candidates.size(), 3u);
  EXPECT_FLOAT_EQ(s.candidates[0].penalty, 1.0f);
  EXPECT_EQ(s.candidates[0].similar_pos, 0);
  EXPECT_NEAR(s.candidates[1].penalty, std::sqrt(0.5), 1e-6);
  EXPECT_EQ(s.candidates[1].similar_pos, 0);
  EXPECT_NEAR(s.candidates[2].penalty, std::sqrt(0.5), 1e-6);
  EXPECT_EQ(s.candidates[2].similar_pos, 1);
  EXPECT_NEAR(s.candidates[1].score, 0.5 * 0.4 - 0.5 * std::sqrt(0.5), 1e-6);
  EXPECT_EQ(s.chosen, 1);  // best score (0.4 - 0.707) / 2
  EXPECT_EQ(s.positions, 2);
  EXPECT_NEAR(s.similarity[2 * 2 + 1], std::sqrt(0.5), 1e-6);
  // Same scores: the first (more probable) candidate wins.
  ContrastiveStep tie = contrastive_rank(probs, {1, 2}, history, {b, b}, 2, 0.5f);
  EXPECT_EQ(tie.chosen, 0);
  // Re-ranking from the record: alpha 0 is the most probable, alpha 1 the
  // least similar.
  EXPECT_EQ(contrastive_choice(s.candidates, 0.0f), 0);
  std::vector<float> scores;
  EXPECT_EQ(contrastive_choice(s.candidates, 1.0f, &scores), 1);
  EXPECT_NEAR(scores[0], -1.0, 1e-6);
  EXPECT_EQ(contrastive_choice(s.candidates, 0.5f), s.chosen);
  EXPECT_THROW(contrastive_rank(probs, {1}, {}, {a}, 2, 0.5f), Error);
  EXPECT_THROW(contrastive_rank(probs, {1, 2}, history, {a}, 2, 0.5f), Error);
}

// ---- against the PyTorch reference ----

void check_against_reference(const LoadedModel& m, const std::string& file) {
  const auto ref = read_json(test::fixture_dir() / "contrastive" / file);
  const int max_new = ref["max_new_tokens"].get<int>();
  ASSERT_FALSE(ref["cases"].empty());
  for (const auto& c : ref["cases"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    ASSERT_EQ(m.tokenizer->encode_ids(prompt), c["prompt_ids"].get<std::vector<int>>());
    ASSERT_EQ(c["runs"].size(), 12u);  // k in {2, 4, 8} x alpha in {0, 0.3, 0.6, 1}
    for (const auto& run : c["runs"]) {
      const int k = run["k"].get<int>();
      const float alpha = run["alpha"].get<float>();
      SCOPED_TRACE(file + " k=" + std::to_string(k) + " alpha=" + std::to_string(alpha));
      auto s = make_session(m, prompt, {contrastive(k, alpha)}, max_new);
      s->run(1000);
      const std::vector<int> tokens = run["tokens"].get<std::vector<int>>();
      ASSERT_EQ(s->lanes()[0].generated, tokens);
      ASSERT_EQ(s->history().size(), tokens.size());
      for (size_t step = 0; step < tokens.size(); ++step) {
        const LaneStep* r = s->record(static_cast<int>(step), 0);
        ASSERT_TRUE(r && r->contrastive);
        const ContrastiveStep& cs = *r->contrastive;
        ASSERT_EQ(static_cast<int>(cs.candidates.size()), k);
        const ContrastiveCandidate& won = cs.candidates[cs.chosen];
        EXPECT_EQ(won.token, r->chosen_token);
        EXPECT_NEAR(won.penalty, run["penalties"][step].get<double>(), 1e-4) << "step " << step;
        EXPECT_NEAR(won.score, run["scores"][step].get<double>(), 1e-4) << "step " << step;
        if (step >= run["steps"].size()) continue;
        const auto& detail = run["steps"][step];
        EXPECT_EQ(cs.chosen, detail["chosen"].get<int>()) << "step " << step;
        for (int i = 0; i < k; ++i) {
          const auto& want = detail["candidates"][i];
          const ContrastiveCandidate& got = cs.candidates[i];
          EXPECT_EQ(got.token, want[0].get<int>()) << "step " << step << " candidate " << i;
          EXPECT_NEAR(got.prob, want[1].get<double>(), 1e-4);
          EXPECT_NEAR(got.penalty, want[2].get<double>(), 1e-4);
          EXPECT_EQ(got.similar_pos, want[3].get<int>()) << "step " << step << " candidate " << i;
          EXPECT_NEAR(got.score, want[4].get<double>(), 1e-4);
        }
      }
      expect_pool_exact(*s);
    }
  }
}

TEST(ContrastiveLane, MatchesReferenceOnFixtureModel) {
  check_against_reference(test::load_tiny(), "tiny.json");
}

TEST(ContrastiveLane, MatchesReferenceOnBundledModel) {
  check_against_reference(bundled(), "bundled.json");
}

TEST(ContrastiveLane, RanksTheProbabilitiesAfterTheBannedWordsStage) {
  // HF runs the logits processors (bad_words_ids among them) before
  // contrastive search takes its top-k: a banned token is never a
  // candidate, and the others' p are renormalised without it.
  LoadedModel m = test::load_tiny();
  auto plain = make_session(m, "The cat sat", {contrastive(4, 0.6f)}, 8);
  plain->prefill();
  const ContrastiveStep& before = *plain->record(0, 0)->contrastive;
  const int banned_token = before.candidates[0].token;
  const std::vector<float> probs = softmax(plain->record(0, 0)->logits);
  plain.reset();  // its blocks go back to the shared pool

  auto banned = std::make_shared<BannedTokens>();
  banned->source = "test";
  banned->entries = 1;
  banned->sequences = {{banned_token}};
  banned->singles = {banned_token};
  auto s = make_session(m, "The cat sat", {contrastive(4, 0.6f)}, 8);
  s->set_banned_words(banned);
  s->run(100);
  ASSERT_GE(s->history().size(), 2u);
  for (size_t step = 0; step < s->history().size(); ++step) {
    const LaneStep* r = s->record(static_cast<int>(step), 0);
    ASSERT_TRUE(r && r->contrastive);
    EXPECT_EQ(r->banned_words, banned);
    for (const ContrastiveCandidate& c : r->contrastive->candidates)
      EXPECT_NE(c.token, banned_token) << "step " << step;
  }
  const ContrastiveStep& after = *s->record(0, 0)->contrastive;
  ASSERT_EQ(after.candidates.size(), 4u);
  const double rest = 1.0 - probs[banned_token];
  for (const ContrastiveCandidate& c : after.candidates)
    EXPECT_NEAR(c.prob, probs[c.token] / rest, 1e-5) << "token " << c.token;
  expect_pool_exact(*s);
}

TEST(ContrastiveLane, AlphaZeroIsGreedy) {
  for (const bool fixture : {true, false}) {
    LoadedModel m = fixture ? test::load_tiny() : bundled();
    SamplingParams greedy;
    // 40 tokens: within both models' context (greedy chooses one token more
    // than contrastive search at the context's end).
    auto s = make_session(m, fixture ? "The cat sat" : "Once upon a time",
                          {greedy, contrastive(4, 0.0f), contrastive(2, 0.0f)}, 40);
    s->run(1000);
    EXPECT_GT(s->lanes()[0].generated.size(), 20u);
    EXPECT_EQ(s->lanes()[1].generated, s->lanes()[0].generated);
    EXPECT_EQ(s->lanes()[2].generated, s->lanes()[0].generated);
    // And a real alpha changes the text (the bundled model repeats itself).
    if (!fixture) {
      auto c = make_session(m, "Once upon a time", {greedy, contrastive(4, 0.6f)});
      c->run(1000);
      EXPECT_NE(c->lanes()[1].generated, c->lanes()[0].generated);
    }
  }
}

TEST(ContrastiveLane, SameTokensWithoutTheKvCache) {
  LoadedModel m = bundled();
  auto on = make_session(m, "Once upon a time", {contrastive(4, 0.6f)}, 24);
  on->run(1000);
  auto off = make_session(m, "Once upon a time", {contrastive(4, 0.6f)}, 24);
  off->set_kv_cache(false);
  off->run(1000);
  EXPECT_EQ(off->lanes()[0].generated, on->lanes()[0].generated);
  EXPECT_TRUE(m.engine->cache().sequences().empty() || off->lanes()[0].seq < 0);
  for (size_t step = 0; step < off->history().size(); ++step) {
    const auto& a = *off->record(static_cast<int>(step), 0)->contrastive;
    const auto& b = *on->record(static_cast<int>(step), 0)->contrastive;
    for (size_t i = 0; i < a.candidates.size(); ++i)
      EXPECT_NEAR(a.candidates[i].penalty, b.candidates[i].penalty, 1e-5);
  }
}

TEST(ContrastiveLane, StepRunsTheCandidatesInOneBatchedForward) {
  LoadedModel m = bundled();
  SamplingParams greedy;
  auto g = make_session(m, "Once upon a time", {greedy});
  auto c = make_session(m, "Once upon a time", {contrastive(4, 0.6f)});
  g->run(3);
  c->run(3);
  const StepTrace& gs = *g->history().back();
  const StepTrace& cs = *c->history().back();
  // Decode step: 4 candidate rows instead of 1 (same weights read once).
  EXPECT_EQ(cs.recomputed_tokens, 4);
  EXPECT_GT(cs.cost.flops, 3.5 * gs.cost.flops);
  EXPECT_LT(cs.cost.bytes(), 2.0 * gs.cost.bytes());
  // Prefill: the prompt, then the 4 candidates of the first token.
  const StepTrace& cp = *c->history().front();
  EXPECT_EQ(cp.recomputed_tokens, static_cast<int>(c->prompt_tokens().size()) + 4);
  EXPECT_GT(cp.cost.flops, g->history().front()->cost.flops);
  // The record's inputs are the previous winner, its logits those it
  // chooses from; the winner's candidate is the token chosen.
  const LaneStep& r = cs.lanes[0];
  ASSERT_TRUE(r.contrastive);
  EXPECT_EQ(r.input_tokens, std::vector<int>{c->lanes()[0].generated[r.step_index - 1]});
  EXPECT_EQ(r.chosen_token, c->lanes()[0].generated[r.step_index]);
  EXPECT_EQ(r.contrastive->positions, r.context());
  EXPECT_EQ(r.contrastive->k, 4);
  EXPECT_FLOAT_EQ(r.contrastive->alpha, 0.6f);
  // Every candidate's probability is the model's softmax of those logits.
  for (const ContrastiveCandidate& cand : r.contrastive->candidates) {
    double z = 0;
    float mx = *std::max_element(r.logits.begin(), r.logits.end());
    for (float l : r.logits) z += std::exp(double(l) - mx);
    EXPECT_NEAR(cand.prob, std::exp(double(r.logits[cand.token]) - mx) / z, 1e-6);
  }
}

// ---- the KV block pool ----

TEST(ContrastiveLane, ForksReturnEveryBlockThroughBackResetBranchClose) {
  LoadedModel m = bundled();
  KvCacheManager& cache = m.engine->cache();
  const int all_free = cache.free_blocks();
  SamplingParams greedy;
  auto s = make_session(m, "Once upon a time there was", {greedy, contrastive(8, 0.6f)}, 40);
  std::vector<int> free_after;              // free blocks after each step
  std::vector<std::vector<int>> generated;  // the contrastive lane's tokens after each step
  for (int i = 0; i < 30; ++i) {
    s->step();
    expect_pool_exact(*s);
    free_after.push_back(cache.free_blocks());
    generated.push_back(s->lanes()[1].generated);
  }
  // Back: the pool and the lane are as they were after each earlier step.
  for (int i = 29; i > 10; --i) {
    s->back();
    expect_pool_exact(*s);
    EXPECT_EQ(cache.free_blocks(), free_after[i - 1]) << "after back to step " << i - 1;
    EXPECT_EQ(s->lanes()[1].generated, generated[i - 1]);
  }
  // Stepping again gives the same tokens (the pending record was restored).
  for (int i = 11; i < 20; ++i) {
    s->step();
    EXPECT_EQ(s->lanes()[1].generated, generated[i]);
    EXPECT_EQ(cache.free_blocks(), free_after[i]);
  }
  // Per-lane back of the contrastive lane, then it steps on alone.
  s->back_lane(1);
  expect_pool_exact(*s);
  EXPECT_EQ(s->lanes()[1].generated, generated[18]);
  // Branching: the greedy lane can branch beside it; the contrastive lane
  // cannot, and the refusal changes nothing.
  const int free_before = cache.free_blocks();
  EXPECT_THROW(s->branch(5, 1, 7), Error);
  EXPECT_EQ(cache.free_blocks(), free_before);
  EXPECT_EQ(s->lanes().size(), 2u);
  const int b = s->branch(5, 0, 7);
  s->step();
  expect_pool_exact(*s);
  // Closing the contrastive lane releases its sequence.
  s->close_lane(1);
  expect_pool_exact(*s);
  s->close_lane(b);
  expect_pool_exact(*s);
  EXPECT_EQ(cache.sequences().size(), 1u);
  s->reset();
  EXPECT_TRUE(cache.sequences().empty());
  EXPECT_EQ(cache.free_blocks(), all_free);
  // Running to the end (token limit) and resetting also returns everything.
  s->prefill();
  s->run(1000);
  expect_pool_exact(*s);
  s->reset();
  EXPECT_EQ(cache.free_blocks(), all_free);
}

TEST(ContrastiveLane, StopsWhereTheNextCandidatesWouldNotFit) {
  LoadedModel m = test::load_tiny();
  const int n_ctx = m.engine->config().n_ctx;
  auto s = make_session(m, "The cat sat on the mat.", {contrastive(4, 0.6f)}, 1000);
  s->run(1000);
  EXPECT_EQ(s->state(), SessionState::kFinished);
  const Lane& lane = s->lanes()[0];
  if (lane.stop_reason.rfind("context end", 0) == 0) {
    EXPECT_EQ(static_cast<int>(s->prompt_tokens().size() + lane.generated.size()), n_ctx);
  }
  expect_pool_exact(*s);
  // A prompt filling the whole context leaves no position for candidates.
  std::string longest = "a";
  while (static_cast<int>(m.tokenizer->encode_ids(longest + " a").size()) <= n_ctx) longest += " a";
  ASSERT_EQ(static_cast<int>(m.tokenizer->encode_ids(longest).size()), n_ctx);
  const std::vector<SeqId> held = m.engine->cache().sequences();
  const int free_before = m.engine->cache().free_blocks();
  auto full = make_session(m, longest, {contrastive(4, 0.6f)});
  EXPECT_THROW(full->prefill(), Error);
  EXPECT_EQ(full->state(), SessionState::kReady);
  EXPECT_EQ(m.engine->cache().sequences(), held);
  EXPECT_EQ(m.engine->cache().free_blocks(), free_before);
}

// ---- refused input ----

TEST(ContrastiveStrategy, ParsesFormatsAndRoundTrips) {
  SamplingParams p = parse_strategy("contrastive=4,alpha=0.6");
  EXPECT_TRUE(p.contrastive());
  EXPECT_EQ(p.contrastive_k, 4);
  EXPECT_FLOAT_EQ(p.penalty_alpha, 0.6f);
  EXPECT_FALSE(p.do_sample);
  EXPECT_EQ(format_strategy(p), "contrastive=4,alpha=0.6");
  EXPECT_EQ(parse_strategy(format_strategy(p)), p);
  EXPECT_EQ(parse_strategy("contrastive=16"), contrastive(16, kDefaultPenaltyAlpha));
  EXPECT_EQ(parse_strategy("alpha=0,contrastive=2"), contrastive(2, 0.0f));
  EXPECT_EQ(parse_strategy(format_strategy(contrastive(2, 1.0f))), contrastive(2, 1.0f));
  EXPECT_EQ(describe(p), "contrastive 4 \u00b7 \u03b1 0.6");
}

TEST(ContrastiveStrategy, BadInputIsOneLineError) {
  const char* bad[] = {
      "contrastive=1",
      "contrastive=17",
      "contrastive=0",
      "contrastive=x",
      "contrastive",
      "contrastive=4,alpha=1.5",
      "contrastive=4,alpha=-0.1",
      "contrastive=4,alpha=nan",
      "alpha=0.5",
      "alpha=0.6",
      "contrastive=4,temperature=0.7",
      "contrastive=4,top_p=0.9",
      "contrastive=4,top_k=5",
      "contrastive=4,sample",
      "contrastive=4,greedy",
      "contrastive=4,beams=2",
      "contrastive=4,repetition_penalty=1.2",
      "contrastive=4,contrastive=2",
  };
  for (const char* text : bad) {
    try {
      parse_strategy(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_FALSE(what.empty());
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_TRUE(what.find("contrastive") != std::string::npos ||
                  what.find("alpha") != std::string::npos)
          << text << ": " << what;
    }
  }
  // The same rules when the parameters are set directly.
  SamplingParams p = contrastive(4, 0.6f);
  p.do_sample = true;
  EXPECT_THROW(p.validate(), Error);
  EXPECT_THROW(contrastive(1, 0.6f).validate(), Error);
  EXPECT_THROW(contrastive(17, 0.6f).validate(), Error);
  EXPECT_THROW(contrastive(4, 1.01f).validate(), Error);
  EXPECT_THROW(contrastive(4, -0.01f).validate(), Error);
  SamplingParams alpha_only;
  alpha_only.penalty_alpha = 0.3f;
  EXPECT_THROW(alpha_only.validate(), Error);
}

TEST(ContrastiveStrategy, RefusedCommandsChangeNothing) {
  LoadedModel m = bundled();
  SamplingParams greedy;
  auto s = make_session(m, "Once upon a time", {greedy, contrastive(4, 0.6f)});
  // Invalid lanes before prefill: refused, the old strategies stay.
  EXPECT_THROW(s->set_strategies({contrastive(20, 0.6f)}), Error);
  EXPECT_THROW(s->set_strategies({contrastive(4, 2.0f)}), Error);
  s->run(5);
  const std::vector<int> before = s->lanes()[1].generated;
  const int free_before = m.engine->cache().free_blocks();
  // Re-choosing a contrastive lane, or turning a lane contrastive, is refused.
  EXPECT_THROW(s->rechoose(1, greedy), Error);
  EXPECT_THROW(s->rechoose(0, contrastive(4, 0.6f)), Error);
  EXPECT_EQ(s->lanes()[1].generated, before);
  EXPECT_EQ(s->lanes()[1].params, contrastive(4, 0.6f));
  EXPECT_EQ(m.engine->cache().free_blocks(), free_before);
  expect_pool_exact(*s);
}

}  // namespace
}  // namespace ts
