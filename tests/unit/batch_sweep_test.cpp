// The batch sweep (engine/batch_sweep.h): its per-batch FLOPs and bytes are
// the cost model's, intensity grows with the batch, a batched step gives
// each sequence the logits it gets decoded alone, and the crossing of the
// ridge is found where the intensities say.
#include "engine/batch_sweep.h"

#include <gtest/gtest.h>

#include <cmath>

#include "bench/random_checkpoint.h"
#include "engine/cpu/cpu_backend.h"
#include "model/model_loader.h"
#include "test_paths.h"
#include "util/error.h"

namespace ts {
namespace {

std::shared_ptr<const ModelWeights> tiny_weights() {
  return std::make_shared<const ModelWeights>(load_model_dir(test::tiny_model_dir()));
}

BatchSweepOptions small_sweep() {
  BatchSweepOptions o;
  o.batches = {1, 2, 4, 8};
  o.context = 20;  // two blocks of 16: the copies cover a full and a partial block
  o.steps = 2;
  return o;
}

TEST(BatchSweep, FlopsAndBytesAreTheCostModelsForEachBatch) {
  const auto w = tiny_weights();
  const BatchSweepOptions o = small_sweep();
  auto engine = make_batch_sweep_engine(w, make_cpu_backend(w, 2), o);
  const BatchSweepResult r = run_batch_sweep(*engine, o, 1e11, 1e10);
  ASSERT_EQ(r.points.size(), o.batches.size());
  for (size_t i = 0; i < r.points.size(); ++i) {
    const BatchSweepPoint& p = r.points[i];
    EXPECT_EQ(p.batch, o.batches[i]);
    const std::vector<EntryShape> entries(static_cast<size_t>(p.batch),
                                          EntryShape{o.context, 1, 1});
    const StepCost want = estimate_step_cost(w->config, entries, w->format);
    EXPECT_DOUBLE_EQ(p.cost.flops, want.flops) << "B=" << p.batch;
    EXPECT_DOUBLE_EQ(p.cost.bytes(), want.bytes()) << "B=" << p.batch;
    EXPECT_DOUBLE_EQ(p.cost.weight_bytes, want.weight_bytes) << "B=" << p.batch;
    EXPECT_GT(p.seconds, 0);
    EXPECT_DOUBLE_EQ(p.tokens_per_second, p.batch / p.seconds);
    EXPECT_DOUBLE_EQ(p.roof, std::min(1e10 * p.intensity, 1e11));
  }
  // Every sequence was released: the sweep leaves its cache empty.
  EXPECT_TRUE(engine->cache().sequences().empty());
}

TEST(BatchSweep, IntensityIncreasesWithTheBatch) {
  const auto w = tiny_weights();
  const BatchSweepOptions o = small_sweep();
  auto engine = make_batch_sweep_engine(w, make_cpu_backend(w, 2), o);
  const BatchSweepResult r = run_batch_sweep(*engine, o, 1e11, 1e10);
  for (size_t i = 1; i < r.points.size(); ++i)
    EXPECT_GT(r.points[i].intensity, r.points[i - 1].intensity) << "B=" << r.points[i].batch;
  // And for a GPT-2-124M shape over the whole default range.
  const ModelConfig gpt2 = bench::gpt2_124m_config();
  double last = 0;
  for (int b = 1; b <= kMaxSweepBatch; ++b) {
    const double i =
        batch_step_cost(gpt2, b, 32, WeightFormat::kF32, WeightFormat::kF32).intensity();
    EXPECT_GT(i, last) << "B=" << b;
    last = i;
  }
}

TEST(BatchSweep, BatchedStepGivesTheLogitsOfEachSequenceDecodedAlone) {
  const auto w = tiny_weights();
  const BatchSweepOptions o = small_sweep();
  auto engine = make_batch_sweep_engine(w, make_cpu_backend(w, 2), o);
  const int batch = 5;
  const std::vector<int> tokens = {3, 17, 42, 5, 99};
  const std::vector<SeqId> seqs = make_sweep_sequences(*engine, batch, o.context);
  std::vector<ForwardRequest> reqs;
  for (int i = 0; i < batch; ++i) reqs.push_back({seqs[i], {tokens[i]}});
  const ForwardResult together = engine->forward(reqs, {});
  for (SeqId s : seqs) engine->cache().release(s);
  for (int i = 0; i < batch; ++i) {
    // Alone: a freshly prefilled sequence (no copied blocks) with the same context.
    const std::vector<SeqId> one = make_sweep_sequences(*engine, 1, o.context);
    const ForwardResult alone = engine->forward({{one[0], {tokens[i]}}}, {});
    engine->cache().release(one[0]);
    const std::vector<float>& a = alone.outputs[0].logits;
    const std::vector<float>& b = together.outputs[i].logits;
    ASSERT_EQ(a.size(), b.size());
    for (size_t j = 0; j < a.size(); ++j) ASSERT_NEAR(b[j], a[j], 1e-5f) << "sequence " << i;
  }
}

TEST(BatchSweep, RidgeCrossingAndFirstComputeBoundBatch) {
  const auto w = tiny_weights();
  const ModelConfig& cfg = w->config;
  const int context = 20;
  auto intensity = [&](double b) {
    return batch_step_cost(cfg, static_cast<int>(b), context, w->format, WeightFormat::kF32)
        .intensity();
  };
  // A ridge between the intensities of B = 5 and B = 6: the prediction lies
  // between them, and of a sweep 1,2,4,8 the first compute-bound batch is 8.
  const double ridge = (intensity(5) + intensity(6)) / 2;
  const double crossing =
      predicted_crossing_batch(cfg, context, w->format, WeightFormat::kF32, ridge);
  EXPECT_GT(crossing, 5);
  EXPECT_LT(crossing, 6);
  BatchSweepResult r;
  r.peak_flops = ridge * 1e9;
  r.bandwidth = 1e9;
  r.context = context;
  for (int b : {1, 2, 4, 8}) {
    BatchSweepPoint p;
    p.batch = b;
    p.seconds = 1e-3;
    p.cost = batch_step_cost(cfg, b, context, w->format, WeightFormat::kF32);
    place_on_roofs(p, r.peak_flops, r.bandwidth);
    EXPECT_EQ(p.compute_roof, b == 8) << "B=" << b;
    r.points.push_back(p);
  }
  summarize_batch_sweep(r, cfg, w->format, WeightFormat::kF32);
  EXPECT_DOUBLE_EQ(r.ridge, ridge);
  EXPECT_EQ(r.first_compute_bound, 8);
  EXPECT_EQ(r.first_compute_bound_text(), "B = 8");
  // A ridge past the intensity's limit is never crossed.
  EXPECT_LT(predicted_crossing_batch(cfg, context, w->format, WeightFormat::kF32, 1e9), 0);
  r.points.pop_back();
  summarize_batch_sweep(r, cfg, w->format, WeightFormat::kF32);
  EXPECT_EQ(r.first_compute_bound, 0);
  EXPECT_EQ(r.first_compute_bound_text(), "none up to 4");
}

// A cancelled sweep stops between steps: no point of a cut-short batch is
// reported, and every sequence is released.
TEST(BatchSweep, ACancelledSweepReportsNothingCutShortAndReleasesItsSequences) {
  const auto w = tiny_weights();
  const BatchSweepOptions o = small_sweep();
  auto engine = make_batch_sweep_engine(w, make_cpu_backend(w, 2), o);
  const std::atomic<bool> stop{true};
  const BatchSweepPoint p = measure_batch(*engine, 4, o, 1e11, 1e10, &stop);
  EXPECT_EQ(p.seconds, 0);
  EXPECT_TRUE(engine->cache().sequences().empty());
  const BatchSweepResult r = run_batch_sweep(*engine, o, 1e11, 1e10, &stop);
  EXPECT_TRUE(r.points.empty());
  EXPECT_EQ(r.first_compute_bound, 0);
  EXPECT_TRUE(engine->cache().sequences().empty());
}

TEST(BatchSweep, RefusesBatchesOutsideTheRangeAndLongContexts) {
  BatchSweepOptions o;
  o.batches = {1, 65};
  EXPECT_THROW(check_batch_sweep(o, 64), Error);
  o.batches = {0};
  EXPECT_THROW(check_batch_sweep(o, 64), Error);
  o.batches = {};
  EXPECT_THROW(check_batch_sweep(o, 64), Error);
  o.batches = {64};
  o.context = 64;
  EXPECT_THROW(check_batch_sweep(o, 64), Error);
  o.context = 63;
  EXPECT_NO_THROW(check_batch_sweep(o, 64));
}

}  // namespace
}  // namespace ts
