// The CPU forward pass against the independent PyTorch reference, and the
// KV cache's promise: cached decode gives the logits of full recomputation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/cpu/attention.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/gelu.h"
#include "engine/cpu/matmul.h"
#include "engine/engine.h"
#include "engine/logit_lens.h"
#include "model/model_loader.h"
#include "test_models.h"
#include "test_paths.h"
#include "util/error.h"
#include "wrapped_backend.h"

namespace ts {
namespace {

std::shared_ptr<Engine> tiny_engine(int cache_tokens = 64 * 8) {
  auto w = std::make_shared<const ModelWeights>(load_model_dir(test::tiny_model_dir()));
  return std::make_shared<Engine>(w, make_cpu_backend(w, 2), cache_tokens);
}

nlohmann::json reference() {
  std::ifstream in(test::tiny_model_dir() / "reference.json");
  return nlohmann::json::parse(in);
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(Forward, MatchesPyTorchReferenceLogitsAndAttention) {
  auto engine = tiny_engine();
  const ModelConfig& cfg = engine->config();
  const auto ref = reference();
  ASSERT_GE(ref["cases"].size(), 3u);
  for (const auto& c : ref["cases"]) {
    const std::vector<int> ids = c["token_ids"].get<std::vector<int>>();
    ForwardOptions opts;
    opts.all_logits = true;
    opts.record_attention = true;
    ForwardResult r = engine->forward_scratch(ids, opts);
    const int t = static_cast<int>(ids.size());
    ASSERT_EQ(r.outputs[0].logit_rows, t);
    float worst_logit = 0, worst_attn = 0;
    for (int i = 0; i < t; ++i) {
      const std::vector<float> want = c["logits"][i].get<std::vector<float>>();
      ASSERT_EQ(static_cast<int>(want.size()), cfg.vocab_size);
      worst_logit = std::max(
          worst_logit,
          max_abs_diff(r.outputs[0].logits.data() + i * cfg.vocab_size, want.data(), want.size()));
    }
    for (int l = 0; l < cfg.n_layer; ++l)
      for (int h = 0; h < cfg.n_head; ++h)
        for (int i = 0; i < t; ++i) {
          const std::vector<float> want = c["attention"][l][h][i].get<std::vector<float>>();
          const float* got =
              r.outputs[0].attention[l].data() + (static_cast<size_t>(h) * t + i) * t;
          worst_attn = std::max(worst_attn, max_abs_diff(got, want.data(), t));
        }
    EXPECT_LE(worst_logit, 1e-4f) << c["prompt"];
    EXPECT_LE(worst_attn, 1e-4f) << c["prompt"];
  }
}

// Logits of a cached decode step vs the same position recomputed from scratch.
TEST(Forward, CachedDecodeEqualsFullRecomputationAtEveryStep) {
  auto engine = tiny_engine();
  const int v = engine->config().vocab_size;
  std::mt19937 rng(7);
  std::vector<int> tokens(40);
  for (int& t : tokens) t = static_cast<int>(rng() % v);
  const SeqId seq = engine->cache().create();
  engine->forward({{seq, {tokens.begin(), tokens.begin() + 5}}}, {});
  for (size_t n = 5; n < tokens.size(); ++n) {
    ForwardResult step = engine->forward({{seq, {tokens[n]}}}, {});
    ForwardResult full = engine->forward_scratch({tokens.begin(), tokens.begin() + n + 1}, {});
    const auto& a = step.outputs[0].logits;
    const auto& b = full.outputs[0].logits;
    ASSERT_EQ(a.size(), b.size());
    for (int i = 0; i < v; ++i)
      ASSERT_NEAR(a[i], b[i], 1e-5 * std::max(1.0f, std::fabs(b[i])))
          << "step " << n << " id " << i;
  }
  engine->cache().release(seq);
  EXPECT_EQ(engine->cache().free_blocks(), engine->cache().shape().num_blocks);
}

// The cache-off step returns what a cached step returns for the last token.
TEST(Forward, UncachedStepReturnsTheLastTokensOutputs) {
  auto engine = tiny_engine();
  std::vector<int> tokens(20);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int>(i * 37 % 200);
  ForwardOptions opts;
  opts.record_attention = true;
  opts.record_residuals = true;
  const SeqId seq = engine->cache().create();
  engine->forward({{seq, {tokens.begin(), tokens.end() - 1}}}, {});
  const ForwardResult cached = engine->forward({{seq, {tokens.back()}}}, opts);
  const ForwardResult uncached = engine->forward_uncached(tokens, opts);
  const EntryOutput &a = cached.outputs[0], &b = uncached.outputs[0];
  EXPECT_EQ(b.logit_rows, 1);
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_EQ(a.residuals, b.residuals);
  ASSERT_EQ(b.attention.size(), a.attention.size());
  for (size_t l = 0; l < a.attention.size(); ++l) EXPECT_EQ(a.attention[l], b.attention[l]) << l;
  EXPECT_EQ(uncached.cost.flops,
            engine->forward_scratch(tokens, {}).cost.flops);  // the whole recomputation's cost
  engine->cache().release(seq);
}

TEST(Forward, BatchedDecodeOfLanesEqualsSingleDecodes) {
  auto engine = tiny_engine();
  const std::vector<int> prompt = {5, 17, 42, 99, 3, 7, 250, 11, 31, 8, 2, 1, 60, 70, 80, 90, 100};
  const SeqId base = engine->cache().create();
  engine->forward({{base, prompt}}, {});
  std::vector<SeqId> lanes = {base, engine->cache().fork(base), engine->cache().fork(base),
                              engine->cache().fork(base)};
  const std::vector<int> next = {1, 2, 3, 4};
  std::vector<ForwardRequest> batch;
  for (size_t i = 0; i < lanes.size(); ++i) batch.push_back({lanes[i], {next[i]}});
  ForwardOptions opts;
  opts.record_attention = true;
  ForwardResult together = engine->forward(batch, opts);
  for (size_t i = 0; i < lanes.size(); ++i) {
    std::vector<int> seq = prompt;
    seq.push_back(next[i]);
    ForwardResult alone = engine->forward_scratch(seq, opts);
    EXPECT_LE(max_abs_diff(together.outputs[i].logits.data(), alone.outputs[0].logits.data(),
                           alone.outputs[0].logits.size()),
              1e-5f);
    // the decode row equals the last row of the full causal map
    const int ctx = static_cast<int>(seq.size());
    for (int h = 0; h < engine->config().n_head; ++h)
      EXPECT_LE(max_abs_diff(together.outputs[i].attention[0].data() + h * ctx,
                             alone.outputs[0].attention[0].data() +
                                 (static_cast<size_t>(h) * ctx + ctx - 1) * ctx,
                             ctx),
                1e-6f);
  }
  EXPECT_GT(together.plans[1].copies.size(), 0u) << "a shared partial block must be copied";
  engine->cache().check_invariants();
}

TEST(Forward, RefusedStepsLeaveTheCacheUnchanged) {
  auto engine = tiny_engine(64 * 2);
  const SeqId seq = engine->cache().create();
  engine->forward({{seq, {1, 2, 3}}}, {});
  const KvOccupancy before = engine->cache().occupancy();
  EXPECT_THROW(engine->forward({{seq, {engine->config().vocab_size}}}, {}), Error);
  EXPECT_THROW(engine->forward({{seq, {-1}}}, {}), Error);
  EXPECT_THROW(engine->forward({{seq, std::vector<int>(62, 1)}}, {}), Error);  // 3 + 62 > 64
  EXPECT_THROW(engine->forward({{seq, {}}}, {}), Error);
  EXPECT_THROW(engine->forward({{seq + 100, {1}}}, {}), Error);
  EXPECT_THROW(engine->forward({{seq, {1}}, {seq, {2}}}, {}), Error);
  // A full cache: two more sequences of 60 tokens do not fit in 8 blocks.
  const SeqId other = engine->cache().create();
  engine->forward({{other, std::vector<int>(60, 4)}}, {});
  const SeqId third = engine->cache().create();
  const KvOccupancy full_before = engine->cache().occupancy();
  try {
    engine->forward({{seq, {5}}, {third, std::vector<int>(60, 4)}}, {});
    FAIL() << "expected the cache to be full";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV cache full"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine->cache().length(seq), 3);
  EXPECT_EQ(engine->cache().occupancy().blocks_used, full_before.blocks_used);
  EXPECT_EQ(before.sequences[0].block_table, engine->cache().block_table(seq));
  engine->cache().check_invariants();
}

// A CPU backend whose block copy or forward can be made to fail, to check that
// the engine gives back every reservation of a refused step.
struct FaultyBackend final : test::WrappedBackend {
  using WrappedBackend::WrappedBackend;
  bool fail_copy = false, fail_forward = false;
  void copy_blocks(const std::vector<BlockCopy>& copies) override {
    if (fail_copy && !copies.empty()) throw Error("injected block copy failure");
    WrappedBackend::copy_blocks(copies);
  }
  void forward(const std::vector<BatchEntry>& batch, const ForwardOptions& options,
               std::vector<EntryOutput>& outputs) override {
    if (fail_forward) throw Error("injected forward failure");
    WrappedBackend::forward(batch, options, outputs);
  }
};

TEST(Forward, FailedBlockCopyOrForwardRollsBackEveryRequest) {
  auto w = std::make_shared<const ModelWeights>(load_model_dir(test::tiny_model_dir()));
  auto faulty = std::make_unique<FaultyBackend>(make_cpu_backend(w, 2));
  FaultyBackend& backend = *faulty;
  Engine engine(w, std::move(faulty), 64 * 4);
  KvCacheManager& cache = engine.cache();
  const std::vector<int> prompt = {5, 17, 42};
  const SeqId other = cache.create();
  engine.forward({{other, {9, 8}}}, {});
  const SeqId base = cache.create();
  engine.forward({{base, prompt}}, {});
  const SeqId fork = cache.fork(base);  // shares the partly filled block: the next write copies it
  const KvOccupancy before = cache.occupancy();
  auto expect_unchanged = [&](const char* what) {
    const KvOccupancy now = cache.occupancy();
    EXPECT_EQ(now.ref_counts, before.ref_counts) << what;
    ASSERT_EQ(now.sequences.size(), before.sequences.size()) << what;
    for (size_t i = 0; i < now.sequences.size(); ++i) {
      EXPECT_EQ(now.sequences[i].tokens, before.sequences[i].tokens) << what << ", seq " << i;
      EXPECT_EQ(now.sequences[i].block_table, before.sequences[i].block_table)
          << what << ", seq " << i;
    }
    EXPECT_EQ(cache.free_blocks(), before.blocks_free) << what;
    cache.check_invariants();
  };
  // The copy fails for the second request, after the first one reserved its slot.
  backend.fail_copy = true;
  EXPECT_THROW(engine.forward({{other, {1}}, {fork, {2}}}, {}), Error);
  expect_unchanged("failed block copy");
  backend.fail_copy = false;
  // The copy succeeds and the forward fails: the copied block is given back too.
  backend.fail_forward = true;
  EXPECT_THROW(engine.forward({{other, {1}}, {fork, {2}}}, {}), Error);
  expect_unchanged("failed forward");
  backend.fail_forward = false;
  // The fork still reads the prompt's keys and values: its next step matches
  // a recomputation from scratch.
  ForwardResult step = engine.forward({{fork, {2}}}, {});
  std::vector<int> all = prompt;
  all.push_back(2);
  ForwardResult full = engine.forward_scratch(all, {});
  EXPECT_EQ(step.outputs[0].logits, full.outputs[0].logits);
  cache.check_invariants();
}

struct MatmulCase {
  int m, k, n;
};

// A KV cache the machine refuses (init_cache throws) leaves the old pools,
// shape and contents as they were: a decode after the refusal gives the bits
// it gave before.
TEST(Forward, RefusedInitCacheKeepsTheOldCache) {
  auto w = std::make_shared<const ModelWeights>(load_model_dir(test::tiny_model_dir()));
  const ModelConfig& cfg = w->config;
  std::unique_ptr<Backend> cpu = make_cpu_backend(w, 2);
  const KvCacheShape shape = test::cache_shape(cfg, 8);
  cpu->init_cache(shape);
  const BackendMemory before = cpu->memory();
  BatchEntry prompt;
  prompt.seq = 0;
  prompt.tokens = {5, 17, 42};
  prompt.slots = {0, 1, 2};
  prompt.block_table = {0};
  std::vector<EntryOutput> out;
  cpu->forward({prompt}, {}, out);
  BatchEntry next = prompt;
  next.tokens = {7};
  next.start_pos = 3;
  next.slots = {3};
  std::vector<EntryOutput> expected;
  cpu->forward({next}, {}, expected);

  KvCacheShape huge = shape;
  huge.num_blocks = std::numeric_limits<int>::max();
  huge.block_size = 1 << 20;  // 2^51 floats a layer: no machine reserves that
  EXPECT_THROW(cpu->init_cache(huge), Error);
  KvCacheShape wrong = shape;
  wrong.n_layer += 1;
  EXPECT_THROW(cpu->init_cache(wrong), Error);
  const BackendMemory after = cpu->memory();
  EXPECT_EQ(after.kv_reserved_bytes, before.kv_reserved_bytes);
  ASSERT_EQ(after.kv_pools.size(), before.kv_pools.size());
  for (size_t i = 0; i < after.kv_pools.size(); ++i)
    EXPECT_EQ(after.kv_pools[i].begin, before.kv_pools[i].begin);
  std::vector<EntryOutput> again;
  cpu->forward({next}, {}, again);  // reads the prompt's keys and values from the old pools
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].logits, expected[0].logits);
}

// The matmul tests below run once with the AVX2 kernels and, where the CPU
// has AVX-512F, once with its twins (a process-wide switch, restored after).
class MatmulKernels : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam() && !cpu::avx512_available()) GTEST_SKIP() << "this CPU has no AVX-512F";
    cpu::allow_avx512(GetParam());
  }
  void TearDown() override { cpu::allow_avx512(true); }
};
INSTANTIATE_TEST_SUITE_P(Vectors, MatmulKernels, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return std::string(p.param ? "Avx512" : "Avx2");
                         });

TEST_P(MatmulKernels, FastPathsMatchTheReference) {
  ThreadPool pool(2);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (MatmulCase c : {MatmulCase{1, 64, 192},
                       {3, 67, 45},
                       {8, 256, 1024},
                       {9, 64, 64},
                       {100, 130, 77},
                       {128, 768, 2304},
                       {7, 5, 3}}) {
    std::vector<float> x(static_cast<size_t>(c.m) * c.k), w(static_cast<size_t>(c.k) * c.n), b(c.n);
    for (float& v : x) v = dist(rng);
    for (float& v : w) v = dist(rng);
    for (float& v : b) v = dist(rng);
    std::vector<float> got(static_cast<size_t>(c.m) * c.n), want(got.size());
    cpu::matmul(x.data(), c.m, c.k, w.data(), c.n, b.data(), got.data(), pool);
    cpu::matmul_reference(x.data(), c.m, c.k, w.data(), c.n, b.data(), want.data());
    EXPECT_LE(max_abs_diff(got.data(), want.data(), got.size()), 2e-5f * std::sqrt(float(c.k)))
        << c.m << "x" << c.k << "x" << c.n;
    // X * W^T with W read as [n][k]: compare with the reference on a transposed copy.
    std::vector<float> bt(static_cast<size_t>(c.n) * c.k);
    for (int i = 0; i < c.k; ++i)
      for (int j = 0; j < c.n; ++j)
        bt[static_cast<size_t>(j) * c.k + i] = w[static_cast<size_t>(i) * c.n + j];
    cpu::matmul_transposed(x.data(), c.m, c.k, bt.data(), c.n, got.data(), pool);
    cpu::matmul_reference(x.data(), c.m, c.k, w.data(), c.n, nullptr, want.data());
    EXPECT_LE(max_abs_diff(got.data(), want.data(), got.size()), 2e-5f * std::sqrt(float(c.k)));
  }
}

// A row's result must not depend on how many rows are multiplied with it:
// a decode step (1 row), a speculative verify pass (2..8 rows, the skinny
// path's row groups of 4, 3, 2 and 1) and a prefill (the packed path) give
// the same token the same bits. Odd sizes reach every tail loop.
TEST_P(MatmulKernels, EveryRowCountGivesEachRowTheSameBits) {
  ThreadPool pool(2);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (MatmulCase c : {MatmulCase{0, 520, 203}, {0, 512, 256}, {0, 100, 40}}) {
    const int max_m = 13;
    std::vector<float> x(static_cast<size_t>(max_m) * c.k), w(static_cast<size_t>(c.k) * c.n),
        b(c.n);
    for (float& v : x) v = dist(rng);
    for (float& v : w) v = dist(rng);
    for (float& v : b) v = dist(rng);
    std::vector<float> one(static_cast<size_t>(max_m) * c.n);
    for (int r = 0; r < max_m; ++r)
      cpu::matmul(x.data() + static_cast<size_t>(r) * c.k, 1, c.k, w.data(), c.n, b.data(),
                  one.data() + static_cast<size_t>(r) * c.n, pool);
    for (int m = 2; m <= max_m; ++m) {
      std::vector<float> got(static_cast<size_t>(m) * c.n);
      cpu::matmul(x.data(), m, c.k, w.data(), c.n, b.data(), got.data(), pool);
      EXPECT_EQ(0, std::memcmp(got.data(), one.data(), sizeof(float) * got.size()))
          << m << " rows, k " << c.k << ", n " << c.n;
    }
  }
}

// The TF32 emulation the CUDA TF32 tolerance is derived from: values keep 10
// mantissa bits (to nearest, ties to even), and while it is on both inputs
// of every product are rounded so, and nothing else changes.
TEST(Matmul, Tf32EmulationRoundsBothInputsOfEveryProduct) {
  EXPECT_EQ(cpu::round_to_tf32(1.0f), 1.0f);
  EXPECT_EQ(cpu::round_to_tf32(1.0f + 0x1p-11f), 1.0f);                       // a tie: to even
  EXPECT_EQ(cpu::round_to_tf32(1.0f + 0x1p-10f + 0x1p-11f), 1.0f + 0x1p-9f);  // a tie: to even
  EXPECT_EQ(cpu::round_to_tf32(1.0f + 0x1p-11f + 0x1p-20f), 1.0f + 0x1p-10f);
  EXPECT_EQ(cpu::round_to_tf32(-3.0f - 0x1p-12f), -3.0f);
  EXPECT_TRUE(std::isinf(cpu::round_to_tf32(std::numeric_limits<float>::infinity())));
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  const int m = 3, k = 300, n = 40;
  std::vector<float> x(m * k), w(k * n), bias(n), xr, wr;
  for (float& v : x) v = nd(rng);
  for (float& v : w) v = nd(rng);
  for (float& v : bias) v = nd(rng);
  for (float v : x) xr.push_back(cpu::round_to_tf32(v));
  for (float v : w) wr.push_back(cpu::round_to_tf32(v));
  std::vector<float> want(m * n), rounded(m * n), got(m * n), plain(m * n);
  cpu::matmul_reference(xr.data(), m, k, wr.data(), n, bias.data(), want.data());
  ThreadPool pool(2);
  cpu::matmul(x.data(), m, k, w.data(), n, bias.data(), plain.data(), pool);
  cpu::matmul(xr.data(), m, k, wr.data(), n, bias.data(), rounded.data(), pool);
  cpu::emulate_tf32(true);
  cpu::matmul(x.data(), m, k, w.data(), n, bias.data(), got.data(), pool);
  cpu::emulate_tf32(false);
  EXPECT_EQ(got, rounded);  // the emulation is the fp32 kernel on rounded inputs
  float d_ref = 0, d_plain = 0;
  for (int i = 0; i < m * n; ++i) {
    d_ref = std::max(d_ref, std::fabs(got[i] - want[i]));
    d_plain = std::max(d_plain, std::fabs(got[i] - plain[i]));
  }
  EXPECT_LT(d_ref, 1e-4f);
  EXPECT_GT(d_plain, 1e-3f);  // rounding the inputs does move the products
  EXPECT_FALSE(cpu::tf32_emulated());
  cpu::matmul(x.data(), m, k, w.data(), n, bias.data(), got.data(), pool);
  EXPECT_EQ(got, plain);
}

// Where the CPU has AVX-512F a product of 1-8 rows reads W with 512-bit
// vectors; it must give the bits of the AVX2 kernel for every row count (the
// row groups of 4, 3, 2 and 1). Column counts reach the 16-wide loop alone
// (256), a remaining 8-wide vector (200 = 12 x 16 + 8) and the scalar tail
// after both (203); k = 520 leaves a tail of whole rows in each half, k = 100
// is not cut in halves.
TEST(Matmul, Avx512SkinnyKernelGivesTheBitsOfTheAvx2Kernel) {
  if (!cpu::avx512_available()) GTEST_SKIP() << "this CPU has no AVX-512F";
  ThreadPool pool(2);
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (MatmulCase c :
       {MatmulCase{0, 520, 203}, {0, 512, 256}, {0, 768, 200}, {0, 100, 40}, {0, 3072, 768}}) {
    for (c.m = 1; c.m <= 8; ++c.m) {
      std::vector<float> x(static_cast<size_t>(c.m) * c.k), w(static_cast<size_t>(c.k) * c.n),
          b(c.n);
      for (float& v : x) v = dist(rng);
      for (float& v : w) v = dist(rng);
      for (float& v : b) v = dist(rng);
      const size_t out = static_cast<size_t>(c.m) * c.n;
      std::vector<float> wide(out), narrow(out);
      cpu::allow_avx512(true);
      ASSERT_TRUE(cpu::avx512_in_use());
      cpu::matmul(x.data(), c.m, c.k, w.data(), c.n, b.data(), wide.data(), pool);
      cpu::allow_avx512(false);
      ASSERT_FALSE(cpu::avx512_in_use());
      cpu::matmul(x.data(), c.m, c.k, w.data(), c.n, b.data(), narrow.data(), pool);
      cpu::allow_avx512(true);
      EXPECT_EQ(0, std::memcmp(wide.data(), narrow.data(), sizeof(float) * out))
          << c.m << " rows, k " << c.k << ", n " << c.n;
    }
  }
}

// The same for the logits' X * W^T: one row (a decode step, eight rows of W
// at a time) and several (four at a time) give each row the same bits. Each
// n leaves a different tail in the last 256-row task (n = 261: one pass of
// four and a scalar row after 256); k = 68 takes the scalar path throughout,
// k = 72 the AVX2 one even where AVX-512 is allowed (16-lane sums need k a
// multiple of 16).
TEST_P(MatmulKernels, TransposedGivesEachRowTheSameBitsForAnyRowCount) {
  ThreadPool pool(2);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (MatmulCase c :
       {MatmulCase{0, 64, 203}, {0, 64, 261}, {0, 768, 1029}, {0, 68, 45}, {0, 72, 45}}) {
    const int max_m = 6;
    std::vector<float> x(static_cast<size_t>(max_m) * c.k), b(static_cast<size_t>(c.n) * c.k);
    for (float& v : x) v = dist(rng);
    for (float& v : b) v = dist(rng);
    std::vector<float> one(static_cast<size_t>(max_m) * c.n);
    for (int r = 0; r < max_m; ++r)
      cpu::matmul_transposed(x.data() + static_cast<size_t>(r) * c.k, 1, c.k, b.data(), c.n,
                             one.data() + static_cast<size_t>(r) * c.n, pool);
    for (int m = 2; m <= max_m; ++m) {
      std::vector<float> got(static_cast<size_t>(m) * c.n);
      cpu::matmul_transposed(x.data(), m, c.k, b.data(), c.n, got.data(), pool);
      EXPECT_EQ(0, std::memcmp(got.data(), one.data(), sizeof(float) * got.size()))
          << m << " rows, k " << c.k << ", n " << c.n;
    }
  }
}

// A head's attention output and probabilities do not depend on which heads
// share its piece: a decode step computes several heads per piece, a prefill
// one. Keys sit at scattered pool slots, as after forks and truncations; a
// head size of 20 takes the scalar dot product.
TEST(Attention, HeadsGroupedInAPieceGiveTheSameBitsAsOneAtATime) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-2, 2);
  for (int head_dim : {64, 20}) {
    const int n_head = 12, c = n_head * head_dim, rows = 3, start = 37, context = start + rows;
    const int slots_in_pool = 96;
    std::vector<float> q(static_cast<size_t>(rows) * 3 * c),
        k(static_cast<size_t>(slots_in_pool) * c), v(k.size());
    for (float& x : q) x = dist(rng);
    for (float& x : k) x = dist(rng);
    for (float& x : v) x = dist(rng);
    std::vector<int> slots(slots_in_pool);
    for (int i = 0; i < slots_in_pool; ++i) slots[i] = i;
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(context);
    cpu::AttentionArgs a;
    a.q = q.data();
    a.ldq = 3 * c;
    a.k_pool = k.data();
    a.v_pool = v.data();
    a.context_slots = slots.data();
    a.start_pos = start;
    a.rows = rows;
    a.n_head = n_head;
    a.head_dim = head_dim;
    a.context = context;
    const auto run = [&](int heads_per_piece, int row_begin, int row_end, std::vector<float>& out,
                         std::vector<float>& probs) {
      out.assign(static_cast<size_t>(rows) * c, -1.0f);
      probs.assign(static_cast<size_t>(n_head) * rows * context, -1.0f);
      a.out = out.data();
      a.probs = probs.data();
      for (int h = 0; h < n_head; h += heads_per_piece)
        cpu::attention(a, h, std::min(n_head, h + heads_per_piece), row_begin, row_end);
    };
    std::vector<float> one_out, one_probs;
    run(1, 0, rows, one_out, one_probs);
    for (int group : {2, 3, 5, 12}) {
      std::vector<float> out, probs;
      run(group, 0, rows, out, probs);
      EXPECT_EQ(0, std::memcmp(out.data(), one_out.data(), sizeof(float) * out.size()))
          << group << " heads per piece, head size " << head_dim;
      EXPECT_EQ(0, std::memcmp(probs.data(), one_probs.data(), sizeof(float) * probs.size()))
          << group << " heads per piece, head size " << head_dim;
    }
    // The probabilities of a row sum to 1 and vanish past its causal limit.
    for (int h = 0; h < n_head; ++h)
      for (int r = 0; r < rows; ++r) {
        const float* p = one_probs.data() + (static_cast<size_t>(h) * rows + r) * context;
        double sum = 0;
        for (int j = 0; j < context; ++j) sum += p[j];
        EXPECT_NEAR(sum, 1.0, 1e-5);
        for (int j = start + r + 1; j < context; ++j) EXPECT_EQ(p[j], 0.0f);
      }
  }
}

// gelu_new against the formula in double over [-20, 20]: within 2 ulps of
// the input (the float tanh form, 0.5 x (1 + tanhf(u)), is within 1.8; the
// error of u itself, rounded in float, dominates both), the limits at the
// ends, and a value's result independent of where in the array it sits.
TEST(Gelu, MatchesTheFormulaInDoubleAndIgnoresPosition) {
  std::vector<float> v;
  for (float x = -20.0f; x <= 20.0f; x += 1e-4f) v.push_back(x);
  std::vector<float> g = v;
  cpu::gelu(g.data(), static_cast<long long>(g.size()));
  double worst = 0;
  float worst_at = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = v[i];
    const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    const double want = 0.5 * x * (1.0 + std::tanh(u));
    const double want_stable = x / (1.0 + std::exp(-2.0 * u));  // the same, without cancellation
    ASSERT_NEAR(want, want_stable, 1e-12) << x;
    const double ulp_of_x = std::ldexp(1.0, std::ilogb(std::max(std::fabs(x), 1e-30)) - 23);
    const double err = std::fabs(g[i] - want_stable) / ulp_of_x;
    if (err > worst) worst = err, worst_at = v[i];
  }
  EXPECT_LE(worst, 2.0) << "at " << worst_at;

  float ends[] = {INFINITY, 1e30f, 100.0f, -100.0f, -1e30f, 0.0f, -0.0f, NAN};
  cpu::gelu(ends, 8);
  EXPECT_EQ(ends[0], INFINITY);
  EXPECT_EQ(ends[1], 1e30f);
  EXPECT_EQ(ends[2], 100.0f);
  EXPECT_EQ(ends[3], 0.0f);
  EXPECT_TRUE(std::signbit(ends[3]));
  EXPECT_EQ(ends[4], 0.0f);
  EXPECT_EQ(ends[5], 0.0f);
  EXPECT_TRUE(std::signbit(ends[6]));
  EXPECT_TRUE(std::isnan(ends[7]));

  // Every value of a 13-float array, gelu'd whole and from every offset.
  std::vector<float> whole(v.begin() + 1000, v.begin() + 1013);
  cpu::gelu(whole.data(), 13);
  for (int off = 0; off < 13; ++off) {
    std::vector<float> part(v.begin() + 1000 + off, v.begin() + 1013);
    cpu::gelu(part.data(), static_cast<long long>(part.size()));
    EXPECT_EQ(0, std::memcmp(part.data(), whole.data() + off, sizeof(float) * part.size())) << off;
  }
}

}  // namespace
}  // namespace ts

namespace ts {
namespace {

TEST(LogitLens, LastLayerEqualsTheModelsOwnLogits) {
  auto w = std::make_shared<const ModelWeights>(load_model_dir(test::tiny_model_dir()));
  Engine engine(w, make_cpu_backend(w, 2), 128);
  ForwardOptions opts;
  opts.record_residuals = true;
  ForwardResult r = engine.forward_scratch({10, 20, 30, 40, 50}, opts);
  const ModelConfig& cfg = w->config;
  ASSERT_EQ(r.outputs[0].residuals.size(), static_cast<size_t>(cfg.n_layer + 1) * cfg.n_embd);
  const std::vector<float> lens = lens_logits(
      *w, r.outputs[0].residuals.data() + static_cast<size_t>(cfg.n_layer) * cfg.n_embd);
  EXPECT_EQ(lens, r.outputs[0].logits);  // same arithmetic, same order: bit-identical
  const std::vector<LensRow> rows = logit_lens(*w, r.outputs[0].residuals, 5);
  ASSERT_EQ(rows.size(), static_cast<size_t>(cfg.n_layer + 1));
  const int argmax =
      static_cast<int>(std::max_element(r.outputs[0].logits.begin(), r.outputs[0].logits.end()) -
                       r.outputs[0].logits.begin());
  EXPECT_EQ(rows.back().top[0].token, argmax);
  EXPECT_THROW(logit_lens(*w, {}, 5), Error);
}

}  // namespace
}  // namespace ts
