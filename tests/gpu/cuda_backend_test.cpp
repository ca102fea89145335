// The CUDA backend against the CPU reference.
//
// Runs everywhere: the fallback when no device answers (auto -> CPU with a
// one-line notice, cuda -> ts::Error) and the host-side forward plan the
// kernels read.
// Needs a GPU (skipped with the reason otherwise): every kernel against its
// CPU twin, the whole forward pass on the tiny fixture (logits <= 1e-3,
// attention <= 1e-4), cached decode vs full recomputation, KV fork /
// copy-on-write / truncate, batched lanes vs single decodes, CUDA graph replay
// vs eager, out-of-memory messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "engine/backend_factory.h"
#include "engine/cpu/attention.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/embedding.h"
#include "engine/cpu/gelu.h"
#include "engine/cpu/layernorm.h"
#include "engine/cpu/matmul.h"
#include "engine/cuda/forward_plan.h"
#include "engine/engine.h"
#include "model/model_loader.h"
#include "sampling/lookahead.h"
#include "scoped_env.h"
#include "test_model_writer.h"
#include "test_models.h"
#include "test_paths.h"
#include "util/error.h"
#ifdef TS_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#include "kernel_harness.h"
#include "require_cuda.h"
#endif
#include "gpu_test_util.h"

namespace ts {
namespace {

std::shared_ptr<const ModelWeights> tiny_weights() {
  return std::make_shared<const ModelWeights>(load_model_dir(test::tiny_model_dir()));
}

using gpu_test::expect_same_outputs;
using gpu_test::max_abs_diff;
using gpu_test::random_vector;

// ---------------------------------------------------------------- everywhere

TEST(CudaFallback, NoDeviceMeansCpuWithOneLineNoticeAndCudaThrows) {
  auto w = tiny_weights();
#ifdef TS_HAVE_CUDA
  std::string why;
  const bool available = cuda_device_available(&why);
  std::string why_not;
  auto direct = make_cuda_backend(w, &why_not);
  if (!available) {
    EXPECT_FALSE(why.empty());
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
    EXPECT_EQ(direct, nullptr);
    EXPECT_EQ(why_not, why);
    BackendSelection sel = make_backend("auto", w, 1);
    ASSERT_NE(sel.backend, nullptr);
    EXPECT_EQ(sel.backend->name(), "cpu");
    EXPECT_NE(sel.notice.find("no usable CUDA device"), std::string::npos) << sel.notice;
    EXPECT_NE(sel.notice.find(why), std::string::npos) << sel.notice;
    EXPECT_EQ(sel.notice.find('\n'), std::string::npos) << sel.notice;
    try {
      make_backend("cuda", w, 1);
      FAIL() << "--device cuda must fail without a device";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("CUDA backend unavailable"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
    std::cout << "[ notice   ] " << sel.notice << "\n";
    // The CPU it fell back to computes.
    Engine engine(w, std::move(sel.backend), 128);
    ForwardResult r = engine.forward_scratch({1, 2, 3}, {});
    EXPECT_EQ(static_cast<int>(r.outputs[0].logits.size()), w->config.vocab_size);
  } else {
    ASSERT_NE(direct, nullptr) << why_not;
    EXPECT_EQ(direct->name(), "cuda");
    BackendSelection sel = make_backend("auto", w, 1);
    EXPECT_EQ(sel.backend->name(), "cuda");
    EXPECT_TRUE(sel.notice.empty()) << sel.notice;
    EXPECT_EQ(make_backend("cuda", w, 1).backend->name(), "cuda");
    std::cout << "[ device   ] " << direct->device_name() << "\n";
  }
#else
  BackendSelection sel = make_backend("auto", w, 1);
  EXPECT_EQ(sel.backend->name(), "cpu");
  EXPECT_NE(sel.notice.find("without CUDA"), std::string::npos) << sel.notice;
  EXPECT_THROW(make_backend("cuda", w, 1), Error);
#endif
  EXPECT_EQ(make_backend("cpu", w, 1).notice, "");
}

// ------------------------------------- the host-side forward plan (no GPU)

BatchEntry entry_for(int start_pos, int n, const std::vector<int>& block_table, int bs) {
  BatchEntry b;
  b.start_pos = start_pos;
  for (int i = 0; i < n; ++i) b.tokens.push_back(i % 7);
  b.block_table = block_table;
  for (int i = 0; i < n; ++i) {
    const int p = start_pos + i;
    b.slots.push_back(block_table[p / bs] * bs + p % bs);
  }
  return b;
}

// Plan options for a 64-token context and pool.
cuda_detail::PlanOptions plan_options(int block_size, int n_head, int tile_size) {
  cuda_detail::PlanOptions o;
  o.block_size = block_size;
  o.n_head = n_head;
  o.n_ctx = 64;
  o.pool_slots = 64;
  o.tile_size = tile_size;
  return o;
}

TEST(CudaForwardPlan, PrefillTilesLogitRowsAndProbabilityLayout) {
  cuda_detail::PlanOptions o = plan_options(4, 3, 8);
  o.vocab_size = 10;
  const std::vector<BatchEntry> batch = {entry_for(0, 20, {5, 1, 2, 9, 3}, 4),
                                         entry_for(6, 2, {0, 4}, 4)};
  cuda_detail::ForwardPlan p = cuda_detail::make_forward_plan(batch, o);
  EXPECT_EQ(p.rows, 22);
  EXPECT_EQ(p.logit_rows, 2);
  EXPECT_EQ(p.tiles, 3);
  EXPECT_EQ(p.row_list_size, 2);  // the short entry goes to the row kernel
  const int* m = p.packed.data();
  EXPECT_EQ(std::vector<int>(m + p.at.tile_row0, m + p.at.tile_row0 + 3),
            (std::vector<int>{0, 8, 16}));
  EXPECT_EQ(std::vector<int>(m + p.at.tile_rows, m + p.at.tile_rows + 3),
            (std::vector<int>{8, 8, 4}));
  EXPECT_EQ(std::vector<int>(m + p.at.row_list, m + p.at.row_list + 2), (std::vector<int>{20, 21}));
  EXPECT_EQ(std::vector<int>(m + p.at.logit_rows, m + p.at.logit_rows + 2),
            (std::vector<int>{19, 21}));
  EXPECT_EQ(m[p.at.positions + 21], 7);
  EXPECT_EQ(m[p.at.slots + 21], 4 * 4 + 3);
  EXPECT_EQ(m[p.at.entry_bt_offset + 1], 5);
  EXPECT_EQ(m[p.at.block_tables + 5 + 1], 4);
  EXPECT_EQ(p.probs_offset, (std::vector<int>{0, 3 * 20 * 20}));
  EXPECT_EQ(p.probs_per_layer, 3 * 20 * 20 + 3 * 2 * 8);
  o.all_logits = true;
  p = cuda_detail::make_forward_plan(batch, o);
  EXPECT_EQ(p.logit_rows, 22);
  EXPECT_EQ(p.logit_begin, (std::vector<int>{0, 20, 22}));
}

// A decode graph is replayed with new metadata at the same addresses: every
// array but the block tables must sit where it sat at the previous step.
TEST(CudaForwardPlan, DecodeOffsetsDoNotDependOnContexts) {
  cuda_detail::PlanOptions o;
  o.block_size = 16;
  o.n_head = 4;
  o.n_ctx = 1024;
  o.pool_slots = 16 * 200;
  o.probs_stride = 256;
  o.max_context = 256;
  std::vector<int> bt(16);
  std::iota(bt.begin(), bt.end(), 0);
  const auto a =
      cuda_detail::make_forward_plan({entry_for(10, 1, bt, 16), entry_for(130, 1, bt, 16)}, o);
  const auto b =
      cuda_detail::make_forward_plan({entry_for(200, 1, bt, 16), entry_for(3, 1, bt, 16)}, o);
  EXPECT_EQ(a.at.tokens, b.at.tokens);
  EXPECT_EQ(a.at.slots, b.at.slots);
  EXPECT_EQ(a.at.entry_probs_offset, b.at.entry_probs_offset);
  EXPECT_EQ(a.at.block_tables, b.at.block_tables);
  EXPECT_EQ(a.probs_per_layer, b.probs_per_layer);
  EXPECT_EQ(a.probs_stride, (std::vector<int>{256, 256}));
  EXPECT_EQ(cuda_detail::context_bucket(1, 1024), 64);
  EXPECT_EQ(cuda_detail::context_bucket(65, 1024), 128);
  EXPECT_EQ(cuda_detail::context_bucket(1000, 1024), 1024);
  EXPECT_EQ(cuda_detail::context_bucket(700, 768), 768);
  EXPECT_EQ(cuda_detail::context_bucket(30, 16), 30);
}

TEST(CudaForwardPlan, RefusesBatchesAKernelWouldWriteOutOfBoundsWith) {
  cuda_detail::PlanOptions o;
  o.block_size = 4;
  o.n_head = 2;
  o.vocab_size = 10;
  o.n_ctx = 32;
  o.pool_slots = 16;
  auto expect_error = [&](BatchEntry b, const std::string& words) {
    try {
      cuda_detail::make_forward_plan({b}, o);
      FAIL() << "expected an error about " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  BatchEntry ok = entry_for(2, 3, {1, 2}, 4);
  EXPECT_NO_THROW(cuda_detail::make_forward_plan({ok}, o));
  BatchEntry b = ok;
  b.slots[1] = 0;
  expect_error(b, "disagrees with the block table");
  b = ok;
  b.block_table = {1};
  expect_error(b, "block table covers");
  b = ok;
  b.tokens[0] = 10;
  expect_error(b, "outside the vocabulary");
  b = entry_for(0, 2, {7}, 4);  // block 7 of a 4-block pool
  expect_error(b, "outside the KV pool");
  b = ok;
  b.slots.pop_back();
  expect_error(b, "one KV slot per new token");
  b = entry_for(30, 3, {0, 1, 2, 3, 0, 1, 2, 3, 0}, 4);
  expect_error(b, "exceeds the model's");
}

// A long decode must not reallocate the metadata (and re-capture every
// decode graph) each time a block table grows by one block: the capacity
// sized from the first step holds every later step's plan, up to n_ctx.
TEST(CudaForwardPlan, MetadataCapacityHoldsEveryContextUpToTheModelsLimit) {
  cuda_detail::PlanOptions o;
  o.block_size = 16;
  o.n_head = 12;
  o.n_ctx = 1024;
  o.pool_slots = 16 * 64 * 4;
  std::vector<std::vector<int>> tables(3, std::vector<int>(64));
  for (int lane = 0; lane < 3; ++lane)
    for (int i = 0; i < 64; ++i) tables[lane][i] = lane * 64 + i;
  auto plan_at = [&](int context) {
    std::vector<BatchEntry> batch;
    for (int lane = 0; lane < 3; ++lane)
      batch.push_back(entry_for(context - 1, 1, tables[lane], 16));
    o.probs_stride = o.max_context = cuda_detail::context_bucket(context, o.n_ctx);
    return cuda_detail::make_forward_plan(batch, o);
  };
  const auto first = plan_at(5);
  const size_t capacity = cuda_detail::metadata_capacity(first, 16, 1024);
  for (int context : {5, 16, 17, 64, 65, 300, 1000, 1024}) {
    const auto p = plan_at(context);
    EXPECT_LE(p.packed.size(), capacity) << "context " << context;
    EXPECT_EQ(cuda_detail::metadata_capacity(p, 16, 1024), capacity) << "context " << context;
    EXPECT_EQ(p.at.block_tables, first.at.block_tables) << "context " << context;
  }
  // Exactly the full block tables: 3 lanes x 64 blocks after the fixed arrays.
  EXPECT_EQ(capacity, static_cast<size_t>(first.at.block_tables) + 3 * 64);
  // A prefill is never larger than its capacity either.
  o.probs_stride = o.max_context = 0;
  const auto prefill = cuda_detail::make_forward_plan({entry_for(0, 40, tables[0], 16)}, o);
  EXPECT_GE(cuda_detail::metadata_capacity(prefill, 16, 1024), prefill.packed.size());
}

// Copy-on-write moves a block in every layer's K and V pool with one plain
// copy per pool: no pitched copy, whose pitch (a whole pool) cudaMemcpy2D
// refuses above 2 GiB. Here each pool is 2.3 GiB (GPT-2 124M, 800k slots).
TEST(CudaForwardPlan, BlockCopiesArePlainCopiesInsideEachPoolEvenAbove2GiB) {
  KvCacheShape shape;
  shape.n_layer = 12;
  shape.n_head = 12;
  shape.head_dim = 64;
  shape.block_size = 16;
  shape.num_blocks = 50000;
  const int c = 768;
  const size_t pool = size_t(50000) * 16 * c;
  ASSERT_GT(pool * sizeof(float), size_t(2) << 30);
  const BlockCopy copy{49999, 3, 11};
  const auto ranges = cuda_detail::block_copy_ranges(copy, shape, c);
  ASSERT_EQ(ranges.size(), 24u);
  for (size_t p = 0; p < ranges.size(); ++p) {
    const auto& r = ranges[p];
    EXPECT_EQ(r.count, size_t(11) * c);
    EXPECT_EQ(r.src, p * pool + size_t(49999) * 16 * c) << p;
    EXPECT_EQ(r.dst, p * pool + size_t(3) * 16 * c) << p;
    // Each copy stays inside its own pool.
    EXPECT_LE(r.src + r.count, (p + 1) * pool);
    EXPECT_LE(r.dst + r.count, (p + 1) * pool);
  }
  EXPECT_TRUE(cuda_detail::block_copy_ranges({1, 2, 0}, shape, c).empty());
  for (const BlockCopy bad :
       {BlockCopy{50000, 0, 1}, BlockCopy{0, -1, 1}, BlockCopy{0, 1, 17}, BlockCopy{0, 1, -1}})
    EXPECT_THROW(cuda_detail::block_copy_ranges(bad, shape, c), Error);
}

// The pinned staging buffer is given back after a step that needs far less
// than it holds (one traced 1,024-token prefill must not keep ~300 MB of
// page-locked memory for the session), and kept when the need is similar.
TEST(CudaForwardPlan, PinnedStagingShrinksAfterAStepThatNeedsFarLess) {
  const size_t mb = size_t(1) << 20;
  EXPECT_TRUE(cuda_detail::staging_should_shrink(300 * mb, 200 * 1024));
  EXPECT_TRUE(cuda_detail::staging_should_shrink(300 * mb, 70 * mb));
  EXPECT_FALSE(cuda_detail::staging_should_shrink(300 * mb, 80 * mb));
  EXPECT_FALSE(cuda_detail::staging_should_shrink(300 * mb, 300 * mb));
  EXPECT_FALSE(cuda_detail::staging_should_shrink(32 * mb, 1024));  // small: kept
}

// A multi-branch pass (lookahead): its entry goes to the row kernel, each
// row's embedding position comes from the entry, its key index and mask are
// packed; a mask the engine would refuse is refused here too.
TEST(CudaForwardPlan, MaskedEntriesGoToTheRowKernelWithTheirPositionsAndMasks) {
  LookaheadWindow w;
  w.rows = 2;
  w.cols = 4;
  w.tokens = {1, 2, 3, 4, 5, 6, 0, 1};
  w.changed.assign(8, 1);
  const LookaheadPassLayout l = lay_out_lookahead_pass(3, 20, &w, {{4, 5}, {6}}, 64);
  const int n = static_cast<int>(l.tokens.size());
  BatchEntry b = entry_for(20, n, {0, 1}, 16);
  b.tokens = l.tokens;
  b.positions = l.positions;
  b.mask = l.mask;
  cuda_detail::PlanOptions o = plan_options(16, 2, 4);
  o.tile_min_rows = 2;
  const cuda_detail::ForwardPlan p = cuda_detail::make_forward_plan({b}, o);
  EXPECT_EQ(p.tiles, 0);
  EXPECT_EQ(p.row_list_size, n);
  const int* m = p.packed.data();
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(m[p.at.positions + i], l.positions[i]);
    EXPECT_EQ(m[p.at.row_key + i], 20 + i);
    EXPECT_EQ(m[p.at.row_mask + i], i * n);
    for (int j = 0; j < n; ++j)
      EXPECT_EQ(m[p.at.masks + i * n + j], l.mask[static_cast<size_t>(i) * n + j]);
  }
  // A causal entry beside it: no mask, keys = positions, tiles as before.
  const cuda_detail::ForwardPlan causal =
      cuda_detail::make_forward_plan({entry_for(0, 9, {2}, 16)}, o);
  EXPECT_GT(causal.tiles, 0);
  EXPECT_EQ(causal.packed[causal.at.row_mask], -1);
  BatchEntry upper = b;
  upper.mask[1] = 1;  // row 0 would see a later row
  EXPECT_THROW(cuda_detail::make_forward_plan({upper}, o), Error);
  KvCacheShape shape = test::cache_shape(ModelConfig{}, 4);
  EXPECT_THROW(cuda_detail::slot_move_ranges({0, 64}, shape, 8), Error);
  EXPECT_EQ(cuda_detail::slot_move_ranges({3, 1}, shape, 8).size(), 2u * shape.n_layer);
}

#ifdef TS_HAVE_CUDA

// ---------------------------------------------------------------- GPU only

using gpu_test::cuda_backend;

TEST(CudaKernels, ElementwiseKernelsMatchTheirCpuTwins) {
  TS_REQUIRE_CUDA();
  std::mt19937 rng(11);
  const int rows = 5, vocab = 50, n_ctx = 40;
  for (int c : {64, 768, 1600, 300}) {
    const auto wte = random_vector(static_cast<size_t>(vocab) * c, rng);
    const auto wpe = random_vector(static_cast<size_t>(n_ctx) * c, rng);
    const std::vector<int> tok = {3, 49, 0, 7, 7}, pos = {0, 1, 2, 39, 5};
    std::vector<float> want(static_cast<size_t>(rows) * c);
    cpu::embed(wte.data(), wpe.data(), tok.data(), pos.data(), rows, c, want.data());
    EXPECT_EQ(max_abs_diff(cuda_check::embed(wte, wpe, tok, pos, c), want), 0.0f) << c;

    auto x = random_vector(static_cast<size_t>(rows) * c, rng, 3.0f);
    for (int i = 0; i < c; ++i) x[i] += 50.0f;  // a row far from zero mean
    const auto w = random_vector(c, rng), b = random_vector(c, rng);
    cpu::layernorm(x.data(), w.data(), b.data(), rows, c, 1e-5f, want.data());
    EXPECT_LE(max_abs_diff(cuda_check::layernorm(x, w, b, rows, c, 1e-5f), want), 1e-4f) << c;

    const auto y = random_vector(x.size(), rng), yb = random_vector(c, rng);
    std::vector<float> x_gpu = x, x_cpu = x, proj(x.size());
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < c; ++i) proj[r * c + i] = y[r * c + i] + yb[i];
    cpu::residual_layernorm(x_cpu.data(), proj.data(), w.data(), b.data(), rows, c, 1e-5f,
                            want.data());
    const auto got = cuda_check::residual_layernorm(x_gpu, y, yb, w, b, rows, c, 1e-5f);
    EXPECT_EQ(max_abs_diff(x_gpu, x_cpu), 0.0f) << c;
    EXPECT_LE(max_abs_diff(got, want), 1e-4f) << c;

    auto h = random_vector(static_cast<size_t>(rows) * c, rng, 3.0f);
    const auto hb = random_vector(c, rng);
    std::vector<float> h_cpu = h;
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < c; ++i) h_cpu[r * c + i] += hb[i];
    cpu::gelu(h_cpu.data(), static_cast<long long>(h_cpu.size()));
    // |v| <= 4 here: 2e-6 is 4 ulps of 4 (CUDA's expf is within 2 ulps, the CPU's e^x about 1).
    EXPECT_LE(max_abs_diff(cuda_check::bias_gelu(h, hb, rows, c), h_cpu), 2e-6f) << c;
  }
  // KV append into a paged pool, and the row gather.
  const int c = 48, slots_n = 24;
  auto qkv = random_vector(static_cast<size_t>(rows) * 3 * c, rng);
  const auto bias = random_vector(3 * c, rng);
  const std::vector<int> slots = {4, 23, 0, 7, 8};
  std::vector<float> k(static_cast<size_t>(slots_n) * c, 0.0f), v = k, k_cpu = k, v_cpu = v,
                                                                qkv_cpu = qkv;
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < 3 * c; ++i) qkv_cpu[r * 3 * c + i] += bias[i];
    std::copy_n(qkv_cpu.begin() + r * 3 * c + c, c, k_cpu.begin() + slots[r] * c);
    std::copy_n(qkv_cpu.begin() + r * 3 * c + 2 * c, c, v_cpu.begin() + slots[r] * c);
  }
  cuda_check::bias_kv_append(qkv, bias, slots, c, k, v);
  EXPECT_EQ(max_abs_diff(qkv, qkv_cpu), 0.0f);
  EXPECT_EQ(max_abs_diff(k, k_cpu), 0.0f);
  EXPECT_EQ(max_abs_diff(v, v_cpu), 0.0f);
  const std::vector<int> index = {4, 0, 2};
  std::vector<float> gathered;
  for (int i : index)
    gathered.insert(gathered.end(), qkv.begin() + i * 3 * c, qkv.begin() + (i + 1) * 3 * c);
  EXPECT_EQ(max_abs_diff(cuda_check::gather_rows(qkv, index, 3 * c), gathered), 0.0f);
}

// Grids put rows on y, which holds at most 65,535 blocks: more rows than
// that must still all be computed (the kernels loop over rows).
TEST(CudaKernels, RowKernelsHandleMoreRowsThanAGridDimensionHolds) {
  TS_REQUIRE_CUDA();
  std::mt19937 rng(14);
  const int rows = 70001, c = 8, vocab = 11, n_ctx = 70001;
  const auto wte = random_vector(static_cast<size_t>(vocab) * c, rng);
  const auto wpe = random_vector(static_cast<size_t>(n_ctx) * c, rng);
  std::vector<int> tok(rows), pos(rows);
  for (int r = 0; r < rows; ++r) {
    tok[r] = r % vocab;
    pos[r] = rows - 1 - r;
  }
  std::vector<float> want(static_cast<size_t>(rows) * c);
  cpu::embed(wte.data(), wpe.data(), tok.data(), pos.data(), rows, c, want.data());
  EXPECT_EQ(max_abs_diff(cuda_check::embed(wte, wpe, tok, pos, c), want), 0.0f);

  std::vector<int> index(rows);
  for (int r = 0; r < rows; ++r) index[r] = (r * 7919) % rows;
  std::vector<float> gathered;
  for (int i : index)
    gathered.insert(gathered.end(), want.begin() + i * c, want.begin() + (i + 1) * c);
  EXPECT_EQ(max_abs_diff(cuda_check::gather_rows(want, index, c), gathered), 0.0f);

  auto qkv = random_vector(static_cast<size_t>(rows) * 3 * c, rng);
  const auto bias = random_vector(3 * c, rng);
  std::vector<int> slots(rows);
  for (int r = 0; r < rows; ++r) slots[r] = rows - 1 - r;
  std::vector<float> k(static_cast<size_t>(rows) * c, 0.0f), v = k, k_cpu = k, v_cpu = v,
                                                             qkv_cpu = qkv;
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < 3 * c; ++i) qkv_cpu[static_cast<size_t>(r) * 3 * c + i] += bias[i];
    std::copy_n(qkv_cpu.begin() + static_cast<size_t>(r) * 3 * c + c, c,
                k_cpu.begin() + static_cast<size_t>(slots[r]) * c);
    std::copy_n(qkv_cpu.begin() + static_cast<size_t>(r) * 3 * c + 2 * c, c,
                v_cpu.begin() + static_cast<size_t>(slots[r]) * c);
  }
  cuda_check::bias_kv_append(qkv, bias, slots, c, k, v);
  EXPECT_EQ(max_abs_diff(qkv, qkv_cpu), 0.0f);
  EXPECT_EQ(max_abs_diff(k, k_cpu), 0.0f);
  EXPECT_EQ(max_abs_diff(v, v_cpu), 0.0f);
}

struct AttnCase {
  std::vector<BatchEntry> batch;
  int blocks = 0;
};

// Entries with shuffled physical blocks: a prefill, decodes, a chunked prefill
// on top of a cache.
AttnCase attention_case(const std::vector<std::pair<int, int>>& shapes, int bs, std::mt19937& rng) {
  AttnCase c;
  for (auto [start, n] : shapes) c.blocks += (start + n + bs - 1) / bs;
  c.blocks += 3;
  std::vector<int> perm(c.blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  int next = 0;
  for (auto [start, n] : shapes) {
    std::vector<int> bt;
    for (int i = 0; i < (start + n + bs - 1) / bs; ++i) bt.push_back(perm[next++]);
    c.batch.push_back(entry_for(start, n, bt, bs));
  }
  return c;
}

void check_attention(const AttnCase& ac, int n_head, int head_dim, int bs,
                     cuda_check::AttentionKernel kernel, int tile, int stride, std::mt19937& rng,
                     int n_kv_head = 0) {
  const int kvh = n_kv_head > 0 ? n_kv_head : n_head;
  const int c = n_head * head_dim, kv = kvh * head_dim, ld = c + 2 * kv;
  const size_t slots = static_cast<size_t>(ac.blocks) * bs;
  int rows = 0;
  for (const BatchEntry& b : ac.batch) rows += static_cast<int>(b.tokens.size());
  const auto qkv = random_vector(static_cast<size_t>(rows) * ld, rng);
  const auto k = random_vector(slots * kv, rng), v = random_vector(slots * kv, rng);
  const auto got = cuda_check::paged_attention(ac.batch, qkv, k, v, n_head, head_dim, bs, kernel,
                                               true, tile, stride, n_kv_head);
  std::vector<float> want(static_cast<size_t>(rows) * c);
  int row0 = 0;
  for (size_t e = 0; e < ac.batch.size(); ++e) {
    const BatchEntry& b = ac.batch[e];
    const int n = static_cast<int>(b.tokens.size()), ctx = b.context();
    std::vector<int> cslots(ctx);
    for (int j = 0; j < ctx; ++j) cslots[j] = b.block_table[j / bs] * bs + j % bs;
    std::vector<float> probs(static_cast<size_t>(n_head) * n * ctx);
    cpu::AttentionArgs a;
    a.q = qkv.data() + static_cast<size_t>(row0) * ld;
    a.ldq = ld;
    a.k_pool = k.data();
    a.v_pool = v.data();
    a.context_slots = cslots.data();
    a.start_pos = b.start_pos;
    a.rows = n;
    a.n_head = n_head;
    a.n_kv_head = kvh;
    a.head_dim = head_dim;
    a.out = want.data() + static_cast<size_t>(row0) * c;
    a.probs = probs.data();
    a.context = ctx;
    for (int h = 0; h < n_head; ++h) cpu::attention(a, h, h + 1, 0, n);
    EXPECT_LE(max_abs_diff(got.probs.at(e), probs), 1e-5f) << "entry " << e;
    row0 += n;
  }
  EXPECT_LE(max_abs_diff(got.out, want), 1e-4f);
}

TEST(CudaKernels, AttentionRowAndTileKernelsMatchTheCpuTwin) {
  TS_REQUIRE_CUDA();
  std::mt19937 rng(12);
  using K = cuda_check::AttentionKernel;
  for (int hd : {16, 64}) {
    const int nh = hd == 16 ? 4 : 3;
    SCOPED_TRACE("head_dim " + std::to_string(hd));
    const AttnCase mixed = attention_case({{0, 37}, {20, 1}, {9, 12}, {0, 1}, {63, 1}}, 4, rng);
    for (int stride : {0, 80}) {
      check_attention(mixed, nh, hd, 4, K::kRow, 0, stride, rng);
      for (int tile : {0, 5, 1}) {
        check_attention(mixed, nh, hd, 4, K::kTile, tile, stride, rng);
        check_attention(mixed, nh, hd, 4, K::kAuto, tile, stride, rng);
      }
    }
    check_attention(attention_case({{0, 1024}}, 16, rng), nh, hd, 16, K::kAuto, 0, 0, rng);
    check_attention(attention_case({{700, 1}, {1023, 1}, {3, 1}}, 16, rng), nh, hd, 16, K::kRow, 0,
                    1024, rng);
  }
  // Grouped-query attention (query head h reads KV head h / (n_head / n_kv_head)),
  // with a head size that is not a multiple of 4 (scalar K/V loads).
  struct Gqa {
    int head_dim, n_head, n_kv_head;
  };
  for (const Gqa g : {Gqa{6, 8, 2}, Gqa{8, 6, 3}, Gqa{64, 4, 1}}) {
    SCOPED_TRACE("GQA head_dim " + std::to_string(g.head_dim) + ", " + std::to_string(g.n_head) +
                 " / " + std::to_string(g.n_kv_head));
    const AttnCase mixed = attention_case({{0, 37}, {20, 1}, {9, 12}, {0, 1}, {63, 1}}, 4, rng);
    for (K kernel : {K::kRow, K::kTile, K::kAuto})
      check_attention(mixed, g.n_head, g.head_dim, 4, kernel, 0, 0, rng, g.n_kv_head);
  }
}

nlohmann::json reference() {
  std::ifstream in(test::tiny_model_dir() / "reference.json");
  return nlohmann::json::parse(in);
}

ForwardOptions everything() {
  ForwardOptions o;
  o.all_logits = true;
  o.record_attention = true;
  o.record_residuals = true;
  return o;
}

TEST(CudaBackend, MatchesTheCpuAndPyTorchOnTheTinyFixture) {
  TS_REQUIRE_CUDA();
  auto w = tiny_weights();
  Engine gpu(w, cuda_backend(w), 64 * 8);
  Engine cpu(w, make_cpu_backend(w, 2), 64 * 8);
  const auto ref = reference();
  for (const auto& c : ref["cases"]) {
    const std::vector<int> ids = c["token_ids"].get<std::vector<int>>();
    const ForwardResult g = gpu.forward_scratch(ids, everything());
    const ForwardResult r = cpu.forward_scratch(ids, everything());
    expect_same_outputs(g.outputs[0], r.outputs[0], 1e-3f, 1e-4f, c["prompt"].get<std::string>());
    const int v = w->config.vocab_size;
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::vector<float> want = c["logits"][i].get<std::vector<float>>();
      EXPECT_LE(max_abs_diff(g.outputs[0].logits.data() + i * v, want.data(), v), 1e-3f);
    }
  }
  // Every prompt length: row kernel (< 8 rows), tiles, partial tiles, blocks.
  std::mt19937 rng(5);
  for (int n : {1, 2, 7, 8, 9, 16, 17, 33, 63, 64}) {
    std::vector<int> ids(n);
    for (int& t : ids) t = static_cast<int>(rng() % w->config.vocab_size);
    expect_same_outputs(gpu.forward_scratch(ids, everything()).outputs[0],
                        cpu.forward_scratch(ids, everything()).outputs[0], 1e-3f, 1e-4f,
                        "length " + std::to_string(n));
  }
}

// GPT-2's head size (64) and a longer context than the fixture's.
TEST(CudaBackend, MatchesTheCpuWithGpt2HeadSizeAndLongPrompts) {
  TS_REQUIRE_CUDA();
  ModelConfig cfg;
  cfg.vocab_size = 500;
  cfg.n_ctx = 512;
  cfg.n_embd = 128;
  cfg.n_head = 2;
  cfg.n_layer = 2;
  const test::RandomGpt2 model = test::make_random_gpt2(cfg, 21);
  auto w = std::make_shared<const ModelWeights>(test::as_model_weights(model));
  Engine gpu(w, cuda_backend(w), 512 * 4);
  Engine cpu(w, make_cpu_backend(w, 2), 512 * 4);
  std::mt19937 rng(6);
  std::vector<int> ids(300);
  for (int& t : ids) t = static_cast<int>(rng() % cfg.vocab_size);
  expect_same_outputs(gpu.forward_scratch(ids, everything()).outputs[0],
                      cpu.forward_scratch(ids, everything()).outputs[0], 1e-3f, 1e-4f,
                      "prefill 300");
  // Three lanes decoding at context ~300 (bucket 512) against the CPU.
  const SeqId gb = gpu.cache().create(), cb = cpu.cache().create();
  gpu.forward({{gb, ids}}, {});
  cpu.forward({{cb, ids}}, {});
  std::vector<SeqId> gl = {gb, gpu.cache().fork(gb), gpu.cache().fork(gb)};
  std::vector<SeqId> cl = {cb, cpu.cache().fork(cb), cpu.cache().fork(cb)};
  ForwardOptions trace;
  trace.record_attention = true;
  trace.record_residuals = true;
  for (int step = 0; step < 4; ++step) {
    std::vector<ForwardRequest> gr, cr;
    for (int i = 0; i < 3; ++i) {
      const int t = static_cast<int>(rng() % cfg.vocab_size);
      gr.push_back({gl[i], {t}});
      cr.push_back({cl[i], {t}});
    }
    const ForwardResult g = gpu.forward(gr, trace), c = cpu.forward(cr, trace);
    for (int i = 0; i < 3; ++i)
      expect_same_outputs(g.outputs[i], c.outputs[i], 1e-3f, 1e-4f,
                          "step " + std::to_string(step) + " lane " + std::to_string(i));
  }
}

// Only the layers asked for are traced (the session's trace budget), in
// prefill and in (graph-replayed) decode.
TEST(CudaBackend, RecordsOnlyTheAskedLayers) {
  TS_REQUIRE_CUDA();
  auto w = tiny_weights();
  Engine gpu(w, cuda_backend(w), 64 * 8);
  Engine cpu(w, make_cpu_backend(w, 2), 64 * 8);
  ForwardOptions o;
  o.record_attention = true;
  o.attention_layers = {false, true};
  const std::vector<int> prompt = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11, 12};
  const SeqId g = gpu.cache().create(), c = cpu.cache().create();
  for (int step = 0; step < 4; ++step) {
    const std::vector<int> toks = step == 0 ? prompt : std::vector<int>{step};
    const ForwardResult a = gpu.forward({{g, toks}}, o), b = cpu.forward({{c, toks}}, o);
    ASSERT_EQ(a.outputs[0].attention.size(), 2u);
    EXPECT_TRUE(a.outputs[0].attention[0].empty());
    expect_same_outputs(a.outputs[0], b.outputs[0], 1e-3f, 1e-4f, "step " + std::to_string(step));
  }
}

// In f32 and in the 16-bit formats (whose matmuls give a row the same bits
// whatever the row count): only attention's row and tile kernels differ.
TEST(CudaBackend, CachedDecodeEqualsFullRecomputationOnTheGpu) {
  TS_REQUIRE_CUDA();
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16}) {
    SCOPED_TRACE(weight_format_name(f));
    auto w = std::make_shared<const ModelWeights>(
        convert_weights(load_model_dir(test::tiny_model_dir()), f));
    Engine engine(w, cuda_backend(w), 64 * 8);
    const int v = w->config.vocab_size;
    std::mt19937 rng(7);
    std::vector<int> tokens(40);
    for (int& t : tokens) t = static_cast<int>(rng() % v);
    const SeqId seq = engine.cache().create();
    engine.forward({{seq, {tokens.begin(), tokens.begin() + 5}}}, {});
    for (size_t n = 5; n < tokens.size(); ++n) {
      const ForwardResult step = engine.forward({{seq, {tokens[n]}}}, {});
      const ForwardResult full =
          engine.forward_scratch({tokens.begin(), tokens.begin() + n + 1}, {});
      const auto& a = step.outputs[0].logits;
      const auto& b = full.outputs[0].logits;
      ASSERT_EQ(a.size(), b.size());
      for (int i = 0; i < v; ++i)
        ASSERT_NEAR(a[i], b[i], 1e-4 * std::max(1.0f, std::fabs(b[i])))
            << "step " << n << " id " << i;
    }
    engine.cache().release(seq);
    EXPECT_EQ(engine.cache().free_blocks(), engine.cache().shape().num_blocks);
  }
}

// The same cache operations on a CPU engine and a GPU engine: forked lanes
// share the prompt's blocks, the first decode copies the shared partial block
// on the device, truncate steps back, and every logit agrees with the CPU.
TEST(CudaBackend, KvForkCopyOnWriteAndTruncateOnTheGpu) {
  TS_REQUIRE_CUDA();
  auto w = tiny_weights();
  Engine gpu(w, cuda_backend(w), 64 * 8);
  Engine cpu(w, make_cpu_backend(w, 2), 64 * 8);
  const std::vector<int> prompt = {5,  17, 42, 99, 3, 7, 250,
                                   11, 31, 8,  2,  1, 60};  // 13: partial block
  ForwardOptions trace;
  trace.record_attention = true;
  auto both = [&](const std::vector<std::pair<SeqId, std::vector<int>>>& reqs,
                  const std::string& what) {
    std::vector<ForwardRequest> r;
    for (const auto& [s, t] : reqs) r.push_back({s, t});
    const ForwardResult g = gpu.forward(r, trace), c = cpu.forward(r, trace);
    EXPECT_EQ(g.plans.size(), c.plans.size());
    for (size_t i = 0; i < r.size(); ++i) {
      EXPECT_EQ(g.plans[i].copies.size(), c.plans[i].copies.size()) << what;
      expect_same_outputs(g.outputs[i], c.outputs[i], 1e-3f, 1e-4f,
                          what + " lane " + std::to_string(i));
    }
    return g;
  };
  const SeqId base = gpu.cache().create();
  ASSERT_EQ(base, cpu.cache().create());
  both({{base, prompt}}, "prefill");
  std::vector<SeqId> lanes = {base};
  for (int i = 0; i < 3; ++i) {
    lanes.push_back(gpu.cache().fork(base));
    ASSERT_EQ(lanes.back(), cpu.cache().fork(base));
  }
  const ForwardResult first =
      both({{lanes[0], {1}}, {lanes[1], {2}}, {lanes[2], {3}}, {lanes[3], {4}}}, "decode 1");
  int copies = 0;
  for (const AppendPlan& p : first.plans) copies += static_cast<int>(p.copies.size());
  EXPECT_GE(copies, 3) << "lanes sharing a partial block must copy it";
  for (int step = 0; step < 5; ++step)  // crosses the block boundary at 16
    both({{lanes[0], {10 + step}},
          {lanes[1], {20 + step}},
          {lanes[2], {30 + step}},
          {lanes[3], {40 + step}}},
         "decode " + std::to_string(step + 2));
  // Step lane 1 back by three tokens, then decode something else.
  const int len = gpu.cache().length(lanes[1]);
  gpu.cache().truncate(lanes[1], len - 3);
  cpu.cache().truncate(lanes[1], len - 3);
  both({{lanes[1], {77}}}, "after truncate");
  // ...which equals recomputing that lane's sequence from scratch.
  std::vector<int> seq = prompt;
  seq.push_back(2);
  for (int step = 0; step < 5 - 3; ++step) seq.push_back(20 + step);
  seq.push_back(77);
  ASSERT_EQ(static_cast<int>(seq.size()), gpu.cache().length(lanes[1]));
  const ForwardResult again = gpu.forward({{lanes[1], {5}}}, {});
  seq.push_back(5);
  const ForwardResult scratch = gpu.forward_scratch(seq, {});
  EXPECT_LE(max_abs_diff(again.outputs[0].logits, scratch.outputs[0].logits), 1e-4f);
  // Release a lane that shares blocks: the others are unaffected.
  gpu.cache().release(lanes[3]);
  cpu.cache().release(lanes[3]);
  both({{lanes[0], {3}}, {lanes[2], {4}}}, "after release");
  gpu.cache().check_invariants();
  for (SeqId s : {lanes[0], lanes[1], lanes[2]}) gpu.cache().release(s);
  EXPECT_EQ(gpu.cache().free_blocks(), gpu.cache().shape().num_blocks);
}

// k lanes in one forward equal k separate computations; several steps so
// the decode graph is run eagerly, captured, then replayed.
TEST(CudaBackend, BatchedLaneDecodeEqualsSingleDecodes) {
  TS_REQUIRE_CUDA();
  auto w = tiny_weights();
  Engine engine(w, cuda_backend(w), 64 * 8);
  const std::vector<int> prompt = {5, 17, 42, 99, 3, 7, 250, 11, 31, 8, 2, 1, 60, 70, 80, 90, 100};
  const SeqId base = engine.cache().create();
  engine.forward({{base, prompt}}, {});
  std::vector<SeqId> lanes = {base, engine.cache().fork(base), engine.cache().fork(base),
                              engine.cache().fork(base)};
  std::vector<std::vector<int>> seqs(lanes.size(), prompt);
  ForwardOptions opts;
  opts.record_attention = true;
  for (int step = 0; step < 4; ++step) {
    std::vector<ForwardRequest> batch;
    for (size_t i = 0; i < lanes.size(); ++i) {
      const int t = static_cast<int>(1 + i + 10 * step);
      batch.push_back({lanes[i], {t}});
      seqs[i].push_back(t);
    }
    const ForwardResult together = engine.forward(batch, opts);
    for (size_t i = 0; i < lanes.size(); ++i) {
      const ForwardResult alone = engine.forward_scratch(seqs[i], opts);
      EXPECT_LE(max_abs_diff(together.outputs[i].logits, alone.outputs[0].logits), 1e-4f)
          << "step " << step << " lane " << i;
      const int ctx = static_cast<int>(seqs[i].size());
      for (int l = 0; l < w->config.n_layer; ++l)
        for (int h = 0; h < w->config.n_head; ++h)
          EXPECT_LE(max_abs_diff(together.outputs[i].attention[l].data() + h * ctx,
                                 alone.outputs[0].attention[l].data() +
                                     (static_cast<size_t>(h) * ctx + ctx - 1) * ctx,
                                 ctx),
                    1e-5f);
    }
  }
  engine.cache().check_invariants();
}

// The graph replay computes what eager launches compute.
TEST(CudaBackend, DecodeGraphReplayEqualsEagerLaunches) {
  TS_REQUIRE_CUDA();
  auto w = tiny_weights();
  std::unique_ptr<Backend> eager_backend;
  {
    const test::ScopedEnv no_graphs("TOKENSCOPE_CUDA_GRAPHS", "0");
    eager_backend = cuda_backend(w);
  }
  EXPECT_NE(eager_backend->device_name().find("graphs off"), std::string::npos);
  Engine eager(w, std::move(eager_backend), 64 * 8);
  Engine graphs(w, cuda_backend(w), 64 * 8);
  EXPECT_NE(graphs.backend().device_name().find("graphs on"), std::string::npos);
  const std::vector<int> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const SeqId a = eager.cache().create(), b = graphs.cache().create();
  eager.forward({{a, prompt}}, {});
  graphs.forward({{b, prompt}}, {});
  ForwardOptions trace;
  trace.record_attention = true;
  trace.record_residuals = true;
  for (int step = 0; step < 60; ++step) {  // contexts 11..64 (buckets 64, and the cap)
    const ForwardOptions& o = step % 3 == 0 ? ForwardOptions{} : trace;
    const ForwardResult x = eager.forward({{a, {step % 400}}}, o);
    const ForwardResult y = graphs.forward({{b, {step % 400}}}, o);
    expect_same_outputs(y.outputs[0], x.outputs[0], 1e-5f, 1e-6f, "step " + std::to_string(step));
    if (eager.cache().length(a) >= w->config.n_ctx) break;
  }
  EXPECT_NE(graphs.backend().device_name().find("graphs on"), std::string::npos)
      << graphs.backend().device_name();
}

// A model with a context long enough for decode graphs of several buckets
// (64, 128, 256).
std::shared_ptr<const ModelWeights> bucket_model() {
  ModelConfig cfg;
  cfg.vocab_size = 300;
  cfg.n_ctx = 256;
  cfg.n_embd = 64;
  cfg.n_head = 4;
  cfg.n_layer = 2;
  static const test::RandomGpt2 model = test::make_random_gpt2(cfg, 31);
  return std::make_shared<const ModelWeights>(test::as_model_weights(model));
}

int captured_graphs(const Backend& b) {
  const std::string name = b.device_name();
  const size_t at = name.find(" captured");
  if (at == std::string::npos) return -1;
  size_t begin = at;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(name[begin - 1]))) --begin;
  return std::stoi(name.substr(begin, at - begin));
}

// A decode that crosses context buckets (64 -> 128 -> 256): each crossing
// captures a new graph for a larger context and grows the probability
// buffer; every step, traced or not, still equals the CPU.
TEST(CudaBackend, DecodeAcrossContextBucketsEqualsTheCpu) {
  TS_REQUIRE_CUDA();
  auto w = bucket_model();
  Engine gpu(w, cuda_backend(w), 256 * 4);
  Engine cpu(w, make_cpu_backend(w, 2), 256 * 4);
  std::vector<int> prompt(40);
  for (int i = 0; i < 40; ++i) prompt[i] = (i * 37) % 300;
  const SeqId g = gpu.cache().create(), c = cpu.cache().create();
  gpu.forward({{g, prompt}}, {});
  cpu.forward({{c, prompt}}, {});
  ForwardOptions trace;
  trace.record_attention = true;
  trace.record_residuals = true;
  int step = 0;
  for (; gpu.cache().length(g) < 200; ++step) {
    // Untraced stretches too: a key without traces is captured on its own.
    const ForwardOptions o = (step / 10) % 2 == 0 ? trace : ForwardOptions{};
    const int t = (step * 13 + 5) % 300;
    const ForwardResult a = gpu.forward({{g, {t}}}, o), b = cpu.forward({{c, {t}}}, o);
    expect_same_outputs(a.outputs[0], b.outputs[0], 1e-3f, 1e-4f,
                        "context " + std::to_string(gpu.cache().length(g)));
    if (HasFailure()) break;
  }
  // Keys (1 lane, bucket, traced or not): at least 64, 128 and 256 traced and
  // untraced were replayed from captured graphs.
  EXPECT_GE(captured_graphs(gpu.backend()), 6) << gpu.backend().device_name();
}

// Graph replay equals eager launches in every bucket, with several lanes.
TEST(CudaBackend, DecodeGraphReplayEqualsEagerAcrossBuckets) {
  TS_REQUIRE_CUDA();
  auto w = bucket_model();
  std::unique_ptr<Backend> eager_backend;
  {
    const test::ScopedEnv no_graphs("TOKENSCOPE_CUDA_GRAPHS", "0");
    eager_backend = cuda_backend(w);
  }
  Engine eager(w, std::move(eager_backend), 256 * 6);
  Engine graphs(w, cuda_backend(w), 256 * 6);
  std::vector<int> prompt(50);
  for (int i = 0; i < 50; ++i) prompt[i] = (i * 11) % 300;
  const SeqId a = eager.cache().create(), b = graphs.cache().create();
  eager.forward({{a, prompt}}, {});
  graphs.forward({{b, prompt}}, {});
  const std::vector<SeqId> la = {a, eager.cache().fork(a), eager.cache().fork(a)};
  const std::vector<SeqId> lb = {b, graphs.cache().fork(b), graphs.cache().fork(b)};
  ForwardOptions trace;
  trace.record_attention = true;
  trace.record_residuals = true;
  for (int step = 0; eager.cache().length(a) < 256; ++step) {
    const ForwardOptions& o = step % 4 == 0 ? ForwardOptions{} : trace;
    std::vector<ForwardRequest> ra, rb;
    for (int i = 0; i < 3; ++i) {
      ra.push_back({la[i], {(step + 100 * i) % 300}});
      rb.push_back({lb[i], {(step + 100 * i) % 300}});
    }
    const ForwardResult x = eager.forward(ra, o), y = graphs.forward(rb, o);
    for (int i = 0; i < 3; ++i)
      expect_same_outputs(
          y.outputs[i], x.outputs[i], 1e-5f, 1e-6f,
          "context " + std::to_string(eager.cache().length(a)) + " lane " + std::to_string(i));
    if (HasFailure()) break;
  }
  EXPECT_GE(captured_graphs(graphs.backend()), 3) << graphs.backend().device_name();
}

// GPT-2 124M's shape (vocab 50257, width 768, 12 layers x 12 heads) and a
// 1,000-token context: prefill, then decode steps, CUDA vs CPU (fp32),
// logits within 1e-3 and attention within 1e-4.
// tf32: TOKENSCOPE_CUDA_TF32=1 (tensor cores: both inputs of every product
// rounded to 10 mantissa bits). Its tolerance is derived here, not guessed:
// the same steps run on the CPU with every product's inputs rounded to TF32
// (cpu::emulate_tf32) give the largest difference TF32 rounding makes to
// these logits and probabilities, d; the GPU must stay within 2 d + the fp32
// tolerance (its rounding falls on other values than the emulation's: the
// largest of its ~250k differences is another sample of the same extreme,
// and 2 d bounds it with room).
struct ParitySteps {
  std::vector<EntryOutput> outputs;  // the prefill's, then each decode step's
};

void expect_gpt2_124m_parity(bool tf32) {
  ModelConfig cfg;
  cfg.vocab_size = 50257;
  cfg.n_ctx = 1024;
  cfg.n_embd = 768;
  cfg.n_head = 12;
  cfg.n_layer = 12;
  static const test::RandomGpt2 model = test::make_random_gpt2(cfg, 124);
  auto w = std::make_shared<const ModelWeights>(test::as_model_weights(model));
  std::unique_ptr<Backend> backend;
  {
    const test::ScopedEnv math("TOKENSCOPE_CUDA_TF32",
                               tf32 ? std::optional<std::string>("1") : std::nullopt);
    backend = cuda_backend(w);
  }
  EXPECT_NE(backend->device_name().find(tf32 ? "TF32" : "fp32"), std::string::npos)
      << backend->device_name();
  std::mt19937 rng(124);
  std::vector<int> prompt(1000), decode(4);
  for (int& t : prompt) t = static_cast<int>(rng() % cfg.vocab_size);
  for (int& t : decode) t = static_cast<int>(rng() % cfg.vocab_size);
  // Attention of the first and the last layer (all twelve would be 1.2 GB).
  ForwardOptions o;
  o.record_attention = true;
  o.attention_layers.assign(cfg.n_layer, false);
  o.attention_layers.front() = o.attention_layers.back() = true;
  o.record_residuals = true;
  auto run = [&](std::unique_ptr<Backend> b) {
    Engine e(w, std::move(b), 1024 * 2);
    const SeqId seq = e.cache().create();
    ParitySteps steps;
    steps.outputs.push_back(e.forward({{seq, prompt}}, o).outputs[0]);
    for (int t : decode) steps.outputs.push_back(e.forward({{seq, {t}}}, o).outputs[0]);
    return steps;
  };
  auto label = [](size_t i) {
    return i == 0 ? std::string("prefill 1000") : "decode at context " + std::to_string(1000 + i);
  };
  const ParitySteps want = run(make_cpu_backend(w, 0));
  float logit_tol = 1e-3f, attn_tol = 1e-4f;
  if (tf32) {
    cpu::emulate_tf32(true);
    ParitySteps rounded;
    try {
      rounded = run(make_cpu_backend(w, 0));
    } catch (...) {
      cpu::emulate_tf32(false);
      throw;
    }
    cpu::emulate_tf32(false);
    float d_logits = 0, d_attn = 0;
    for (size_t i = 0; i < want.outputs.size(); ++i) {
      d_logits =
          std::max({d_logits, max_abs_diff(rounded.outputs[i].logits, want.outputs[i].logits),
                    max_abs_diff(rounded.outputs[i].residuals, want.outputs[i].residuals)});
      for (size_t l = 0; l < want.outputs[i].attention.size(); ++l)
        d_attn = std::max(
            d_attn, max_abs_diff(rounded.outputs[i].attention[l], want.outputs[i].attention[l]));
    }
    logit_tol += 2 * d_logits;
    attn_tol += 2 * d_attn;
    std::cout << "[ parity   ] TF32 rounding on the CPU moves logits by up to " << d_logits
              << ", attention by " << d_attn << ": tolerances " << logit_tol << ", " << attn_tol
              << "\n";
    ::testing::Test::RecordProperty("tf32_logit_tolerance", std::to_string(logit_tol));
  }
  const ParitySteps got = run(std::move(backend));
  std::cout << "[ parity   ] " << (tf32 ? "TF32" : "fp32") << " prefill 1000: logits max |diff| "
            << max_abs_diff(got.outputs[0].logits, want.outputs[0].logits) << "\n";
  for (size_t i = 0; i < want.outputs.size(); ++i)
    expect_same_outputs(got.outputs[i], want.outputs[i], logit_tol, attn_tol, label(i));
}

TEST(CudaBackend, MatchesTheCpuAtGpt2SmallSizeWithAThousandTokenContext) {
  TS_REQUIRE_CUDA();
  expect_gpt2_124m_parity(false);
}

TEST(CudaBackend, Tf32MatchesTheCpuAtItsOwnTolerance) {
  TS_REQUIRE_CUDA();
  expect_gpt2_124m_parity(true);
}

TEST(CudaBackend, OutOfMemoryIsAClearMessage) {
  TS_REQUIRE_CUDA();
  auto w = tiny_weights();
  auto backend = cuda_backend(w);
  const KvCacheShape huge = test::cache_shape(w->config, 1 << 30);  // terabytes
  try {
    backend->init_cache(huge);
    FAIL() << "a terabyte KV cache cannot fit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA out of memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("KV cache"), std::string::npos) << e.what();
  }
  // The backend is still usable with a cache that fits.
  KvCacheShape ok = huge;
  ok.num_blocks = 8;
  backend->init_cache(ok);
}

// A KV cache the device refuses leaves the old one intact: its pools and
// contents (the decode after the refusal gives the bits it gave before).
// The three-token prompt of a fresh cache, in block 0.
BatchEntry prompt_entry() {
  BatchEntry e;
  e.seq = 0;
  e.tokens = {5, 17, 42};
  e.slots = {0, 1, 2};
  e.block_table = {0};
  return e;
}

TEST(CudaBackend, RefusedInitCacheKeepsTheOldCache) {
  TS_REQUIRE_CUDA();
  auto w = tiny_weights();
  auto backend = cuda_backend(w);
  const KvCacheShape shape = test::cache_shape(w->config, 8);
  backend->init_cache(shape);
  const int64_t reserved = backend->memory().kv_reserved_bytes;
  std::vector<EntryOutput> out, expected, again;
  backend->forward({prompt_entry()}, {}, out);
  BatchEntry next = prompt_entry();
  next.tokens = {7};
  next.start_pos = 3;
  next.slots = {3};
  backend->forward({next}, {}, expected);
  KvCacheShape huge = shape;
  huge.num_blocks = 1 << 30;  // terabytes
  EXPECT_THROW(backend->init_cache(huge), Error);
  EXPECT_EQ(backend->memory().kv_reserved_bytes, reserved);
  backend->forward({next}, {}, again);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].logits, expected[0].logits);
}

// The memory report's GPU part comes from the backend: the weights' device
// copy, the pools, and the device's free and total memory.
TEST(CudaBackend, ReportsItsDeviceMemory) {
  TS_REQUIRE_CUDA();
  auto w = tiny_weights();
  auto backend = cuda_backend(w);
  const BackendMemory m = backend->memory();
  EXPECT_FALSE(m.on_host);
  EXPECT_GE(m.weight_copy_bytes, static_cast<int64_t>(w->config.parameter_count() * 4));
  EXPECT_GT(m.total_bytes, m.free_bytes);
  EXPECT_GT(m.free_bytes, 0);
  EXPECT_GT(backend->kv_budget_bytes(), 0);
}

// Not a check: the figure scripts/gpu-check.sh divides decode times by.
TEST(CudaDevice, ReportsCopyBandwidth) {
  TS_REQUIRE_CUDA();
  std::string device;
  const double bw = cuda_check::device_copy_bandwidth(&device);
  EXPECT_GT(bw, 1e9);
  RecordProperty("device", device);
  RecordProperty("copy_bandwidth_gb_per_s", std::to_string(bw * 1e-9));
  std::cout << "[ device   ] " << device << ": device-to-device copy " << bw * 1e-9 << " GB/s\n";
}

// A lookahead pass (window, two candidates, the paper's mask) on the GPU
// gives the CPU's logits and attention for every fed row, and keep_rows
// leaves the GPU's cache as the CPU's: the next step agrees too.
TEST(CudaBackend, MaskedPassAndKeepRowsMatchTheCpu) {
  TS_REQUIRE_CUDA();
  auto w = tiny_weights();
  Engine gpu(w, cuda_backend(w), 64 * 8);
  Engine cpu(w, make_cpu_backend(w, 2), 64 * 8);
  const std::vector<int> prompt = {5, 17, 42, 99, 3, 7, 250, 11, 31, 8};
  LookaheadWindow win = initial_window(LookaheadConfig{}, prompt);
  const LookaheadPassLayout l =
      lay_out_lookahead_pass(12, static_cast<int>(prompt.size()), &win, {{40, 41, 42}, {50}}, 64);
  EntryOutput out[2];
  Engine* engines[2] = {&gpu, &cpu};
  for (int e = 0; e < 2; ++e) {
    Engine& engine = *engines[e];
    const SeqId seq = engine.cache().create();
    engine.forward({{seq, prompt}}, {});
    ForwardRequest r(seq, l.tokens);
    r.positions = l.positions;
    r.mask = l.mask;
    ForwardOptions o = everything();
    o.record_residuals = false;
    engine.forward({r}, o);
    engine.keep_rows(seq, static_cast<int>(prompt.size()), {0, 1, 2});
    out[e] = engine.forward({{seq, {77}}}, everything()).outputs[0];
    engine.cache().release(seq);
  }
  expect_same_outputs(out[0], out[1], 1e-3f, 1e-4f, "after keep_rows");
  for (int e = 0; e < 2; ++e) {
    const SeqId seq = engines[e]->cache().create();
    engines[e]->forward({{seq, prompt}}, {});
    ForwardRequest r(seq, l.tokens);
    r.positions = l.positions;
    r.mask = l.mask;
    ForwardOptions o = everything();
    o.record_residuals = false;
    out[e] = engines[e]->forward({r}, o).outputs[0];
    engines[e]->cache().release(seq);
  }
  expect_same_outputs(out[0], out[1], 1e-3f, 1e-4f, "the masked pass");
}

#endif  // TS_HAVE_CUDA

}  // namespace
}  // namespace ts
