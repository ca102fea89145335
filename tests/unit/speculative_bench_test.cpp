// The bench's speculative-decoding figures: the predicted speed-up against a
// direct sum of the expected tokens per round, the totals taken from round
// records, the cost ratio, the pair check, and the random writer's
// first-layers draft (the target's own tensors).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/random_checkpoint.h"
#include "bench/speculative_bench.h"
#include "model/model_loader.h"
#include "util/error.h"

namespace {

using ts::bench::predicted_speedup;

// E[tokens a round commits] written as the sum 1 + α + ... + α^γ (integer
// γ), not the closed form the code uses.
double expected_tokens_by_sum(double alpha, int gamma) {
  double sum = 0, term = 1;
  for (int i = 0; i <= gamma; ++i, term *= alpha) sum += term;
  return sum;
}

TEST(SpeculativeBench, PredictedSpeedupMatchesTheSumOverAGrid) {
  for (double alpha : {0.0, 0.1, 0.37, 0.5, 0.8, 0.95, 0.999, 1.0})
    for (int gamma : {1, 2, 4, 7, 16})
      for (double c : {0.0, 0.05, 0.3, 1.0, 2.5}) {
        const double want = expected_tokens_by_sum(alpha, gamma) / (gamma * c + 1);
        EXPECT_NEAR(predicted_speedup(alpha, gamma, c), want, 1e-9 * want)
            << "alpha " << alpha << " gamma " << gamma << " c " << c;
      }
}

TEST(SpeculativeBench, PredictedSpeedupKnownValues) {
  // Nothing accepted and a free draft: one token per target pass, as plain.
  EXPECT_DOUBLE_EQ(predicted_speedup(0.0, 4, 0.0), 1.0);
  // α 0.5, γ 4, c 0.1: 1.9375 tokens a round for 1.4 steps.
  EXPECT_NEAR(predicted_speedup(0.5, 4, 0.1), 1.9375 / 1.4, 1e-12);
  // Self-draft: α 1, c 1: γ + 1 tokens for γ + 1 steps.
  EXPECT_DOUBLE_EQ(predicted_speedup(1.0, 4, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(predicted_speedup(1.0, 4, 0.25), 2.5);
  // Continuous at α = 1 and for fractional γ (spec=auto's mean).
  EXPECT_NEAR(predicted_speedup(1.0 - 1e-9, 3, 0.2), predicted_speedup(1.0, 3, 0.2), 1e-6);
  EXPECT_NEAR(predicted_speedup(0.6, 2.5, 0.1), (1 - std::pow(0.6, 3.5)) / (0.4 * 1.25), 1e-12);
}

TEST(SpeculativeBench, PredictedSpeedupRefusesOutOfRangeInputs) {
  EXPECT_THROW(predicted_speedup(-0.1, 4, 0.1), ts::Error);
  EXPECT_THROW(predicted_speedup(1.5, 4, 0.1), ts::Error);
  EXPECT_THROW(predicted_speedup(std::nan(""), 4, 0.1), ts::Error);
  EXPECT_THROW(predicted_speedup(0.5, 0, 0.1), ts::Error);
  EXPECT_THROW(predicted_speedup(0.5, 4, -0.1), ts::Error);
  EXPECT_THROW(predicted_speedup(0.5, 4, INFINITY), ts::Error);
}

TEST(SpeculativeBench, TotalsFromRoundRecords) {
  ts::SpecRound a, b, c;
  a.gamma = 4;
  a.accepted = 4;
  a.committed = {1, 2, 3, 4, 5};
  a.draft_passes = 4;
  a.draft_seconds = 0.04;
  a.verify_seconds = 0.2;
  b.gamma = 4;
  b.accepted = 1;
  b.committed = {6, 7};
  b.draft_passes = 4;
  b.draft_seconds = 0.05;
  b.verify_seconds = 0.22;
  c.gamma = 2;  // clamped near the end
  c.accepted = 0;
  c.committed = {8};
  c.draft_passes = 2;
  c.draft_seconds = 0.03;
  c.verify_seconds = 0.18;
  const ts::bench::SpecRoundTotals t = ts::bench::total_rounds({&a, nullptr, &b, &c});
  EXPECT_EQ(t.rounds, 3);
  EXPECT_EQ(t.drafted, 10);
  EXPECT_EQ(t.accepted, 5);
  EXPECT_EQ(t.committed, 8);
  EXPECT_EQ(t.draft_passes, 10);
  EXPECT_DOUBLE_EQ(t.acceptance_rate(), 0.5);
  EXPECT_NEAR(t.mean_gamma(), 10.0 / 3, 1e-12);
  EXPECT_NEAR(t.seconds_per_draft_pass(), 0.012, 1e-12);
  EXPECT_NEAR(t.seconds_per_verify_pass(), 0.2, 1e-12);

  const ts::bench::SpecRoundTotals none = ts::bench::total_rounds({});
  EXPECT_EQ(none.acceptance_rate(), 0.0);
  EXPECT_EQ(none.mean_gamma(), 0.0);
  EXPECT_EQ(none.seconds_per_draft_pass(), 0.0);
}

TEST(SpeculativeBench, CostRatio) {
  EXPECT_NEAR(ts::bench::cost_ratio(0.012, 0.1), 0.12, 1e-12);
  EXPECT_THROW(ts::bench::cost_ratio(0.01, 0.0), ts::Error);
  EXPECT_THROW(ts::bench::cost_ratio(-0.01, 0.1), ts::Error);
  EXPECT_THROW(ts::bench::cost_ratio(0.01, std::nan("")), ts::Error);
}

TEST(SpeculativeBench, PairCheckRefusesAVocabularyMismatchInOneLine) {
  ts::ModelConfig target = ts::bench::gpt2_355m_config();
  ts::ModelConfig draft = ts::bench::gpt2_124m_config();
  EXPECT_NO_THROW(ts::bench::check_spec_pair(target, draft, "pair big/small"));
  draft.vocab_size = 8192;
  try {
    ts::bench::check_spec_pair(target, draft, "pair big/small");
    FAIL() << "a vocabulary mismatch was accepted";
  } catch (const ts::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_NE(m.find("pair big/small"), std::string::npos) << m;
    EXPECT_NE(m.find("8192"), std::string::npos) << m;
    EXPECT_NE(m.find("50257"), std::string::npos) << m;
  }
}

bool same_floats(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

TEST(SpeculativeBench, FirstLayersDraftHoldsTheTargetsOwnTensors) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ts_spec_bench_" + std::to_string(::getpid()));
  ts::ModelConfig big;
  big.vocab_size = 300;
  big.n_ctx = 16;
  big.n_embd = 8;
  big.n_head = 2;
  big.n_layer = 3;
  ts::ModelConfig small = big;
  small.n_layer = 1;
  ts::bench::write_random_checkpoint(big, dir / "target", 7);
  ts::bench::write_random_checkpoint(small, dir / "first", 7, big.n_layer);
  ts::bench::write_random_checkpoint(small, dir / "rescaled", 7);  // its own init scale
  const ts::ModelWeights t = ts::load_model(dir / "target");
  const ts::ModelWeights f = ts::load_model(dir / "first");
  const ts::ModelWeights r = ts::load_model(dir / "rescaled");
  const size_t C = 8;
  ASSERT_EQ(f.layers.size(), 1u);
  EXPECT_TRUE(same_floats(t.wte, f.wte, 300 * C));
  EXPECT_TRUE(same_floats(t.wpe, f.wpe, 16 * C));
  const ts::LayerWeights& a = t.layers[0];
  const ts::LayerWeights& b = f.layers[0];
  EXPECT_TRUE(same_floats(a.attn_qkv_weight, b.attn_qkv_weight, C * 3 * C));
  EXPECT_TRUE(same_floats(a.attn_proj_weight, b.attn_proj_weight, C * C));
  EXPECT_TRUE(same_floats(a.mlp_fc_weight, b.mlp_fc_weight, C * 4 * C));
  EXPECT_TRUE(same_floats(a.mlp_proj_weight, b.mlp_proj_weight, 4 * C * C));
  EXPECT_TRUE(same_floats(t.ln_f_weight, f.ln_f_weight, C));
  // Without init_layers the projections follow the shallower model's scale.
  EXPECT_FALSE(same_floats(a.attn_proj_weight, r.layers[0].attn_proj_weight, C * C));
  EXPECT_TRUE(same_floats(a.attn_qkv_weight, r.layers[0].attn_qkv_weight, C * 3 * C));
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
