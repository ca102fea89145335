#include "engine/batch_sweep.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "util/error.h"
#include "util/median.h"

namespace ts {
namespace {

// Every sequence's KV rows for `context` tokens plus the one a step appends.
int blocks_per_sequence(int context, int block_size) {
  return (context + 1 + block_size - 1) / block_size;
}

}  // namespace

std::string BatchSweepResult::first_compute_bound_text() const {
  if (first_compute_bound > 0) return "B = " + std::to_string(first_compute_bound);
  int largest = 0;
  for (const BatchSweepPoint& p : points) largest = std::max(largest, p.batch);
  return "none up to " + std::to_string(largest);
}

StepCost batch_step_cost(const ModelConfig& config, int batch, int context, WeightFormat format,
                         WeightFormat kv_format) {
  const std::vector<EntryShape> entries(static_cast<size_t>(batch), EntryShape{context, 1, 1});
  return estimate_step_cost(config, entries, format, kv_format);
}

double predicted_crossing_batch(const ModelConfig& config, int context, WeightFormat format,
                                WeightFormat kv_format, double ridge) {
  // flops(B) = f0 + B f1 and bytes(B) = b0 + B b1 (the weights once, each
  // sequence's KV and embedding row per sequence): solve flops = ridge * bytes.
  const StepCost one = batch_step_cost(config, 1, context, format, kv_format);
  const StepCost two = batch_step_cost(config, 2, context, format, kv_format);
  const double f1 = two.flops - one.flops, f0 = one.flops - f1;
  const double b1 = two.bytes() - one.bytes(), b0 = one.bytes() - b1;
  const double denom = f1 - ridge * b1;
  if (denom <= 0) return -1;  // the intensity's limit, f1 / b1, stays below the ridge
  return std::max(0.0, (ridge * b0 - f0) / denom);
}

int batch_sweep_cache_tokens(const BatchSweepOptions& options, int block_size) {
  int largest = 1;
  for (int b : options.batches) largest = std::max(largest, b);
  return largest * blocks_per_sequence(options.context, block_size) * block_size;
}

std::unique_ptr<Engine> make_batch_sweep_engine(std::shared_ptr<const ModelWeights> weights,
                                                std::unique_ptr<Backend> backend,
                                                const BatchSweepOptions& options,
                                                WeightFormat kv_format) {
  return std::make_unique<Engine>(std::move(weights), std::move(backend),
                                  batch_sweep_cache_tokens(options), 16, kv_format);
}

std::vector<SeqId> make_sweep_sequences(Engine& engine, int batch, int context, uint32_t seed) {
  KvCacheManager& cache = engine.cache();
  std::vector<SeqId> seqs;
  try {
    std::mt19937 rng(seed);
    std::vector<int> tokens(static_cast<size_t>(context));
    for (int& t : tokens)
      t = static_cast<int>(rng() % static_cast<uint32_t>(engine.config().vocab_size));
    seqs.push_back(cache.create());
    engine.forward({ForwardRequest{seqs[0], tokens}}, {});
    const int bs = cache.shape().block_size;
    for (int i = 1; i < batch; ++i) {
      const SeqId s = cache.create();
      seqs.push_back(s);
      const AppendPlan plan = cache.append(s, context);  // a new sequence: nothing to copy on write
      engine.backend().copy_blocks(plan.copies);
      const std::vector<int>& from = cache.block_table(seqs[0]);
      const std::vector<int>& to = cache.block_table(s);
      std::vector<BlockCopy> copies;
      for (size_t j = 0; j < to.size(); ++j)
        copies.push_back({from[j], to[j], std::min(bs, context - static_cast<int>(j) * bs)});
      engine.backend().copy_blocks(copies);
    }
  } catch (...) {
    for (SeqId s : seqs) cache.release(s);
    throw;
  }
  return seqs;
}

void check_batch_sweep(const BatchSweepOptions& options, int n_ctx) {
  if (options.batches.empty()) throw Error("batch sweep: no batch sizes");
  for (int b : options.batches)
    if (b < 1 || b > kMaxSweepBatch)
      throw Error("batch sweep: batch size " + std::to_string(b) + " outside 1.." +
                  std::to_string(kMaxSweepBatch));
  if (options.context < 1 || options.context + 1 > n_ctx)
    throw Error("batch sweep: a context of " + std::to_string(options.context) +
                " tokens plus the decoded one exceeds the model's context of " +
                std::to_string(n_ctx));
  if (options.steps < 1) throw Error("batch sweep: at least one timed step");
}

void place_on_roofs(BatchSweepPoint& p, double peak_flops, double bandwidth) {
  p.intensity = p.cost.intensity();
  p.flops_per_s = p.seconds > 0 ? p.cost.flops / p.seconds : 0;
  p.tokens_per_second = p.seconds > 0 ? p.batch / p.seconds : 0;
  p.roof = std::min(bandwidth * p.intensity, peak_flops);
  p.fraction_of_roof = p.roof > 0 ? p.flops_per_s / p.roof : 0;
  p.compute_roof = bandwidth > 0 && p.intensity >= peak_flops / bandwidth;
}

BatchSweepPoint measure_batch(Engine& engine, int batch, const BatchSweepOptions& options,
                              double peak_flops, double bandwidth,
                              const std::atomic<bool>* cancel) {
  KvCacheManager& cache = engine.cache();
  const std::vector<SeqId> seqs = make_sweep_sequences(engine, batch, options.context);
  BatchSweepPoint p;
  p.batch = batch;
  try {
    std::mt19937 rng(11);
    const uint32_t v = static_cast<uint32_t>(engine.config().vocab_size);
    std::vector<double> times;
    for (int s = 0; s <= options.steps; ++s) {
      if (cancel && cancel->load()) break;
      std::vector<ForwardRequest> reqs;
      for (SeqId q : seqs) reqs.push_back({q, {static_cast<int>(rng() % v)}});
      const ForwardResult r = engine.forward(reqs, {});
      // Every step runs at the same context: the token just decoded is
      // dropped again, so each timed step has the same shape and cost.
      for (SeqId q : seqs) cache.truncate(q, options.context);
      if (s == 0) continue;  // untimed: the first touch of the step's buffers
      times.push_back(r.seconds);
      p.cost = r.cost;
    }
    p.seconds = times.size() == static_cast<size_t>(options.steps) ? median(times) : 0;
  } catch (...) {
    for (SeqId q : seqs) cache.release(q);
    throw;
  }
  for (SeqId q : seqs) cache.release(q);
  place_on_roofs(p, peak_flops, bandwidth);
  return p;
}

void summarize_batch_sweep(BatchSweepResult& r, const ModelConfig& config, WeightFormat format,
                           WeightFormat kv_format) {
  r.ridge = r.bandwidth > 0 ? r.peak_flops / r.bandwidth : 0;
  r.predicted_crossing = predicted_crossing_batch(config, r.context, format, kv_format, r.ridge);
  r.first_compute_bound = 0;
  for (const BatchSweepPoint& p : r.points)
    if (p.compute_roof && (r.first_compute_bound == 0 || p.batch < r.first_compute_bound))
      r.first_compute_bound = p.batch;
}

BatchSweepResult run_batch_sweep(Engine& engine, const BatchSweepOptions& options,
                                 double peak_flops, double bandwidth,
                                 const std::atomic<bool>* cancel) {
  check_batch_sweep(options, engine.config().n_ctx);
  BatchSweepResult r;
  r.peak_flops = peak_flops;
  r.bandwidth = bandwidth;
  r.context = options.context;
  for (int b : options.batches) {
    BatchSweepPoint p = measure_batch(engine, b, options, peak_flops, bandwidth, cancel);
    if (cancel && cancel->load()) break;  // p may be cut short
    r.points.push_back(p);
  }
  summarize_batch_sweep(r, engine.config(), engine.weights().format, engine.cache().shape().format);
  return r;
}

}  // namespace ts
