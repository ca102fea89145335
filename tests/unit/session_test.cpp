// The step machine: prefill, step, back, run to the end, lanes, budgets,
// cache off, the worker thread and the JSON export.
#include <gtest/gtest.h>

#include <cmath>

#include "session/model_setup.h"
#include "session/session.h"
#include "session/session_export.h"
#include "session/session_worker.h"
#include "test_models.h"
#include "test_paths.h"
#include "util/error.h"

namespace ts {
namespace {

using test::sampled;

LoadedModel tiny() { return test::load_tiny(); }

std::unique_ptr<Session> make_session(const LoadedModel& m, SessionOptions o = {}) {
  return std::make_unique<Session>(m.tokenizer, m.engine, o);
}

TEST(Session, PrefillStepBackRestoresEverything) {
  LoadedModel m = tiny();
  auto s = make_session(m);
  EXPECT_EQ(s->state(), SessionState::kNoPrompt);
  s->set_prompt("The cat sat on the mat.");
  EXPECT_EQ(s->state(), SessionState::kReady);
  EXPECT_EQ(s->next_action(),
            "prefill: " + std::to_string(s->prompt_tokens().size()) + " tokens in one pass");
  const StepTrace& pre = s->prefill();
  const int t = static_cast<int>(s->prompt_tokens().size());
  EXPECT_EQ(pre.phase, Phase::kPrefill);
  ASSERT_EQ(pre.lanes.size(), 1u);
  EXPECT_EQ(pre.lanes[0].slots_written.size(), static_cast<size_t>(t));
  ASSERT_EQ(pre.lanes[0].attention.size(), 2u);
  EXPECT_EQ(pre.lanes[0].attention[0]->size(), static_cast<size_t>(4 * t * t));
  EXPECT_EQ(s->next_action(),
            "decode step 1: 1 token, reads " + std::to_string(t) + " cached positions");
  const KvOccupancy after_prefill = m.engine->cache().occupancy();
  std::vector<std::vector<int>> generated;
  for (int i = 0; i < 5; ++i) {
    generated.push_back(s->lanes()[0].generated);
    const StepTrace& st = s->step();
    EXPECT_EQ(st.phase, Phase::kDecode);
    EXPECT_EQ(st.lanes[0].slots_written.size(), 1u);
    EXPECT_EQ(st.lanes[0].start_pos, t + i);
    EXPECT_EQ(st.lanes[0].attention[1]->size(), static_cast<size_t>(4 * (t + i + 1)));
  }
  EXPECT_EQ(m.engine->cache().length(s->lanes()[0].seq), t + 5);
  for (int i = 4; i >= 0; --i) {
    s->back();
    EXPECT_EQ(s->lanes()[0].generated, generated[i]);
    EXPECT_EQ(m.engine->cache().length(s->lanes()[0].seq), t + i);
  }
  EXPECT_EQ(m.engine->cache().occupancy().blocks_used, after_prefill.blocks_used);
  s->back();
  EXPECT_EQ(s->state(), SessionState::kReady);
  EXPECT_EQ(m.engine->cache().occupancy().blocks_used, 0);
  EXPECT_THROW(s->back(), Error);
}

TEST(Session, SameSeedSameTokensAndStepBackReproduces) {
  LoadedModel m = tiny();
  auto a = make_session(m);
  a->set_strategies({sampled(1.0f, 42)});
  a->set_prompt("hello world");
  a->run(12);
  const std::vector<int> first = a->lanes()[0].generated;
  a->back();
  a->back();
  a->run(2);
  EXPECT_EQ(a->lanes()[0].generated, first);
  a->reset();
  a->run(12);
  EXPECT_EQ(a->lanes()[0].generated, first);
}

TEST(Session, RunStopsAtTokenLimitAndContextEnd) {
  LoadedModel m = tiny();
  SessionOptions o;
  o.max_new_tokens = 6;
  auto s = make_session(m, o);
  s->set_prompt("a b c");
  EXPECT_EQ(s->run(100), 6);  // prefill + 5 decode steps choose 6 tokens
  EXPECT_EQ(s->state(), SessionState::kFinished);
  EXPECT_EQ(s->lanes()[0].stop_reason, "token limit (6)");
  EXPECT_THROW(s->step(), Error);

  // Context end: the tiny model holds 64 tokens.
  o.max_new_tokens = 1000;
  auto c = make_session(m, o);
  std::string prompt = "x";
  while (m.tokenizer->encode(prompt + " x").size() <= 60) prompt += " x";
  c->set_prompt(prompt);
  const int t = static_cast<int>(c->prompt_tokens().size());
  ASSERT_LE(t, 64);
  c->run(1000);
  EXPECT_EQ(c->state(), SessionState::kFinished);
  EXPECT_NE(c->lanes()[0].stop_reason.find("context end"), std::string::npos);
  EXPECT_EQ(m.engine->cache().length(c->lanes()[0].seq), 64);
}

TEST(Session, BadInputIsRefusedAndStateKept) {
  LoadedModel m = tiny();
  auto s = make_session(m);
  s->set_prompt("keep me");
  s->prefill();
  const auto tokens = s->lanes()[0].generated;
  EXPECT_THROW(s->set_prompt(""), Error);
  std::string huge;
  for (int i = 0; i < 200; ++i) huge += " word";
  try {
    s->set_prompt(huge);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos);
  }
  EXPECT_THROW(s->set_strategies({sampled(0.0f, 1)}), Error);
  SamplingParams bad;
  bad.top_p = 1.5f;
  EXPECT_THROW(s->rechoose(0, bad), Error);
  EXPECT_THROW(s->prefill(), Error);
  EXPECT_EQ(s->prompt_text(), "keep me");
  EXPECT_EQ(s->lanes()[0].generated, tokens);
  EXPECT_EQ(s->history().size(), 1u);
}

TEST(Session, LanesShareOnePrefillAndMatchSeparateSessions) {
  LoadedModel m = tiny();
  auto s = make_session(m);
  const std::vector<SamplingParams> strategies = {SamplingParams{}, sampled(0.8f, 3),
                                                  sampled(1.5f, 9)};
  s->set_strategies(strategies);
  s->set_prompt("The quick brown fox jumps over the lazy dog");
  s->prefill();
  const KvOccupancy kv = m.engine->cache().occupancy();
  EXPECT_GT(kv.blocks_shared, 0);
  s->run(6);
  for (size_t i = 0; i < strategies.size(); ++i) {
    LoadedModel alone_model = tiny();
    auto alone = make_session(alone_model);
    alone->set_strategies({strategies[i]});
    alone->set_prompt("The quick brown fox jumps over the lazy dog");
    alone->run(7);
    EXPECT_EQ(alone->lanes()[0].generated, s->lanes()[i].generated) << "lane " << i;
    const auto& a = alone->history().back()->lanes[0].logits;
    const auto& b = s->history().back()->lanes[i].logits;
    ASSERT_EQ(a.size(), b.size());
    for (size_t j = 0; j < a.size(); ++j) ASSERT_NEAR(a[j], b[j], 1e-5f);
  }
  // Closing everything returns every block.
  s.reset();
  m.engine->cache().check_invariants();
  EXPECT_EQ(m.engine->cache().free_blocks(), m.engine->cache().shape().num_blocks);
}

TEST(Session, RechooseKeepsLogitsAndChangesOnlyTheChoice) {
  LoadedModel m = tiny();
  auto s = make_session(m);
  s->set_prompt("Once upon a time");
  s->run(3);
  const std::vector<float> logits = s->history().back()->lanes[0].logits;
  const int cached = m.engine->cache().length(s->lanes()[0].seq);
  const int greedy_choice = s->lanes()[0].generated.back();
  bool changed = false;
  for (uint64_t seed = 1; seed < 40 && !changed; ++seed) {
    s->rechoose(0, sampled(3.0f, seed));
    changed = s->lanes()[0].generated.back() != greedy_choice;
    EXPECT_EQ(s->history().back()->lanes[0].logits, logits);
    EXPECT_EQ(s->lanes()[0].generated.back(), s->history().back()->lanes[0].chosen_token);
  }
  EXPECT_TRUE(changed) << "a hot temperature should pick another token for some seed";
  EXPECT_EQ(m.engine->cache().length(s->lanes()[0].seq), cached);
  s->step();  // continues from the re-chosen token
  EXPECT_EQ(s->history().back()->lanes[0].input_tokens[0], s->lanes()[0].generated.end()[-2]);
}

TEST(Session, AttentionOverBudgetIsRecomputedNotDropped) {
  LoadedModel m = tiny();
  SessionOptions small;
  small.trace_budget_bytes = 1;  // nothing fits: every layer recomputed
  auto s = make_session(m, small);
  auto full = make_session(m);
  for (Session* x : {s.get(), full.get()}) {
    x->set_prompt("The cat sat on the mat and looked at the dog.");
    x->run(4);
  }
  for (int step = 0; step < 4; ++step) {
    EXPECT_FALSE(s->history()[step]->lanes[0].attention[0]);
    for (int layer = 0; layer < 2; ++layer) {
      const std::vector<float> a = s->attention(step, 0, layer);
      const std::vector<float> b = full->attention(step, 0, layer);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6f);
    }
  }
}

TEST(Session, CacheOffGivesTheSameTokensAndLogits) {
  LoadedModel m = tiny();
  SessionOptions off;
  off.kv_cache = false;
  off.max_new_tokens = 32;
  SessionOptions on = off;
  on.kv_cache = true;
  auto a = make_session(m, on);
  auto b = make_session(m, off);
  for (Session* x : {a.get(), b.get()}) {
    x->set_prompt("It was a bright cold day in April");
    x->run(32);
  }
  EXPECT_EQ(a->lanes()[0].generated, b->lanes()[0].generated);
  double worst = 0;
  for (size_t i = 0; i < a->history().size(); ++i) {
    const auto& la = a->history()[i]->lanes[0].logits;
    const auto& lb = b->history()[i]->lanes[0].logits;
    for (size_t j = 0; j < la.size(); ++j)
      worst = std::max(worst, double(std::fabs(la[j] - lb[j])));
    if (i > 0) {
      EXPECT_GT(b->history()[i]->cost.flops, a->history()[i]->cost.flops);
      EXPECT_EQ(b->history()[i]->recomputed_tokens, a->history()[i]->lanes[0].context());
    }
  }
  EXPECT_LE(worst, 1e-4);
  // Cache-off cost grows with the sequence; cache-on decode cost stays nearly flat.
  const double off_growth = b->history()[31]->cost.flops / b->history()[1]->cost.flops;
  const double on_growth = a->history()[31]->cost.flops / a->history()[1]->cost.flops;
  EXPECT_GT(off_growth, 2.0);
  EXPECT_LT(on_growth, 1.5);
}

TEST(Session, JsonExportHoldsEveryStep) {
  LoadedModel m = tiny();
  auto s = make_session(m);
  s->set_prompt("café 👋 world");
  s->run(4);
  const nlohmann::json j = session_to_json(*s);
  EXPECT_EQ(j["steps"].size(), 4u);
  EXPECT_EQ(j["steps"][0]["phase"], "prefill");
  EXPECT_EQ(j["steps"][1]["lanes"][0]["input_tokens"].size(), 1u);
  EXPECT_EQ(j["steps"][0]["lanes"][0]["sampling_stages"].size(), 8u);
  EXPECT_EQ(j["prompt_tokens"].size(), s->prompt_tokens().size());
  EXPECT_GT(j["steps"][2]["flops"].get<double>(), 0.0);
}

TEST(SessionWorker, CommandsRunOnTheWorkerAndErrorsKeepState) {
  LoadedModel m = tiny();
  SessionWorker w(make_session(m), "tiny");
  w.set_prompt("Hello there");
  w.prefill();
  w.step();
  w.step();
  w.wait_idle();
  SnapshotPtr s = w.snapshot();
  EXPECT_EQ(s->history.size(), 3u);
  EXPECT_EQ(s->lanes[0].generated.size(), 3u);
  EXPECT_TRUE(s->last_error.empty());
  w.set_prompt("");  // refused
  w.wait_idle();
  SnapshotPtr after = w.snapshot();
  EXPECT_EQ(after->error_serial, s->error_serial + 1);
  EXPECT_EQ(after->last_error, "prompt is empty");
  EXPECT_EQ(after->history.size(), 3u);
  std::vector<float> att;
  EXPECT_TRUE(w.attention(0, 0, 1, att));
  EXPECT_EQ(att.size(), after->history[0]->lanes[0].attention[1]->size());
  w.run(1000.0);
  for (int i = 0; i < 500 && w.snapshot()->state != SessionState::kFinished; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  w.wait_idle();
  EXPECT_EQ(w.snapshot()->state, SessionState::kFinished);
}

}  // namespace
}  // namespace ts
