// The KV cache on/off comparison: both runs are real, give the same tokens and
// logits, and only the cache-off run's cost grows with the sequence.
#include <gtest/gtest.h>

#include "cache_comparison_check.h"
#include "session/cache_comparison.h"
#include "session/model_setup.h"
#include "session/session.h"
#include "test_models.h"
#include "test_paths.h"
#include "util/error.h"

namespace ts {
namespace {

using test::expect_cache_on_equals_off;

TEST(CacheComparison, TinyModelSameTokensAndLogitsAndOnlyCacheOffGrows) {
  expect_cache_on_equals_off(test::tiny_model_dir(), 32);
}

TEST(CacheComparison, BundledModelSameTokensAndLogitsFor32Steps) {
  expect_cache_on_equals_off(std::filesystem::path(TS_SOURCE_DIR) / "assets/models/tokenscope-tiny",
                             32);
}

TEST(CacheComparison, StopsAtTheContextEndAndRefusesBadInput) {
  LoadedModel m = test::load_tiny();
  const int n_ctx = m.engine->config().n_ctx;
  const std::vector<int> prompt(n_ctx - 3, 7);
  const CacheComparison c = compare_kv_cache(*m.engine, prompt, {}, 50);
  EXPECT_EQ(c.steps(), 4);  // the prefill and three decode steps fill the context
  EXPECT_EQ(c.off.steps.back().context, n_ctx);
  EXPECT_THROW(compare_kv_cache(*m.engine, {}, {}, 5), Error);
  EXPECT_THROW(compare_kv_cache(*m.engine, prompt, {}, 0), Error);
  SamplingParams bad;
  bad.top_p = 2;
  EXPECT_THROW(compare_kv_cache(*m.engine, prompt, bad, 5), Error);
  EXPECT_THROW(compare_kv_cache(*m.engine, std::vector<int>(n_ctx + 1, 1), {}, 5), Error);
}

// A DoLa strategy chooses from the layer contrast in both runs, as its lane
// does: the comparison's tokens are the DoLa lane's, not plain greedy's.
TEST(CacheComparison, ADolaStrategyChoosesTheTokensItsLaneChooses) {
  const std::filesystem::path bundled =
      std::filesystem::path(TS_SOURCE_DIR) / "assets/models/tokenscope-tiny";
  const LoadedModel m = test::load_model(bundled, "cpu");
  const std::string prompt = "Once upon a time";
  const SamplingParams dola = parse_strategy("dola=0,1,2,3");
  constexpr int kSteps = 12;
  const CacheComparison c =
      compare_kv_cache(*m.engine, m.tokenizer->encode_ids(prompt), dola, kSteps);
  ASSERT_EQ(c.steps(), kSteps);
  EXPECT_TRUE(c.same_tokens);
  std::vector<int> compared;
  for (const CacheRunStep& st : c.on.steps) compared.push_back(st.chosen);

  SessionOptions o;
  o.max_new_tokens = kSteps;
  o.record_attention = false;
  Session lane(m.tokenizer, m.engine, o);
  lane.set_prompt(prompt);
  lane.set_strategies({dola});
  lane.run(1000);
  EXPECT_EQ(compared, lane.lanes()[0].generated);

  // Plain greedy picks other tokens here, so the check above can tell.
  const CacheComparison greedy =
      compare_kv_cache(*m.engine, m.tokenizer->encode_ids(prompt), SamplingParams{}, kSteps);
  std::vector<int> greedy_tokens;
  for (const CacheRunStep& st : greedy.on.steps) greedy_tokens.push_back(st.chosen);
  EXPECT_NE(greedy_tokens, compared);
  // A layer the model does not have: one line.
  EXPECT_THROW(
      compare_kv_cache(*m.engine, m.tokenizer->encode_ids(prompt), parse_strategy("dola=9"), 2),
      Error);
}

TEST(CacheComparison, JsonHoldsBothRunsAndTheVerdict) {
  LoadedModel m = test::load_tiny();
  const nlohmann::json j = cache_comparison_to_json(compare_kv_cache(*m.engine, {1, 2, 3}, {}, 6));
  EXPECT_EQ(j["steps"], 6);
  EXPECT_EQ(j["cache_on"]["steps"].size(), 6u);
  EXPECT_EQ(j["cache_off"]["steps"].size(), 6u);
  EXPECT_TRUE(j["same_tokens"].get<bool>());
  EXPECT_GT(j["flop_ratio_off_over_on"].get<double>(), 1.0);
}

}  // namespace
}  // namespace ts
