#pragma once
// The KV cache on/off comparison on one model and device: both runs give the
// same tokens and logits (1e-4 on the CPU, 1e-3 on CUDA), only the cache-off
// run's cost grows with the sequence, and the cache is left as it was.
// Shared by the CPU tests and the GPU tests (their own binary).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "session/cache_comparison.h"
#include "test_models.h"
#include "util/error.h"

namespace ts::test {

inline void expect_cache_on_equals_off(const std::filesystem::path& model, int steps,
                                       const std::string& device = "cpu") {
  LoadedModel m;
  try {
    m = load_model(model, device);
  } catch (const Error& e) {
    GTEST_SKIP() << "no " << device << " backend here: " << e.what();
  }
  const double tolerance = device == "cuda" ? 1e-3 : 1e-4;
  const std::vector<int> prompt = {m.tokenizer->encode("The weather today is")[0].id, 5, 9, 2};
  const KvOccupancy before = m.engine->cache().occupancy();
  SamplingParams sampled;
  sampled.do_sample = true;
  sampled.temperature = 0.9f;
  sampled.seed = 11;
  for (const SamplingParams& p : {SamplingParams{}, sampled}) {
    const CacheComparison c = compare_kv_cache(*m.engine, prompt, p, steps);
    ASSERT_EQ(c.steps(), steps);
    EXPECT_TRUE(c.same_tokens) << "first difference at step " << c.first_difference;
    EXPECT_LE(c.max_abs_logit_diff, tolerance);
    // The prefill is the same work both ways; after it, the cache-off step
    // runs the whole sequence, so its FLOPs and bytes grow with the context
    // while the cached step's FLOPs grow only through attention.
    EXPECT_EQ(c.on.steps[0].cost.flops, c.off.steps[0].cost.flops);
    for (int s = 2; s < c.steps(); ++s) {
      EXPECT_EQ(c.on.steps[s].tokens_run, 1);
      EXPECT_EQ(c.off.steps[s].tokens_run, c.off.steps[s].context);
      EXPECT_GT(c.off.steps[s].cost.flops, c.off.steps[s - 1].cost.flops);
      EXPECT_GT(c.off.steps[s].cost.flops, c.on.steps[s].cost.flops);
      const double on_growth = c.on.steps[s].cost.flops - c.on.steps[s - 1].cost.flops;
      const double off_growth = c.off.steps[s].cost.flops - c.off.steps[s - 1].cost.flops;
      EXPECT_LT(on_growth * 20, off_growth);
      EXPECT_EQ(c.on.steps[s].cost.weight_bytes, c.on.steps[2].cost.weight_bytes);
    }
    EXPECT_GT(c.off.flops(), 4 * c.on.flops());
  }
  const KvOccupancy after = m.engine->cache().occupancy();
  EXPECT_EQ(after.blocks_used, before.blocks_used);
  EXPECT_EQ(after.ref_counts, before.ref_counts);
}

}  // namespace ts::test
