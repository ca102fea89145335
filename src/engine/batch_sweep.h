#pragma once
// The batch sweep: decode throughput against batch size. For each batch size
// B, B independent sequences with the same short cached context are decoded
// together, one new token each, in ONE batched step; the step's time is
// measured and placed on the roofline by its analytic cost (the weights are
// read once per step, every sequence's KV cache once). Arithmetic intensity
// grows with B while the step stays memory bound, until it crosses the ridge
// (peak FLOP/s over bandwidth) and the compute roof takes over.
//
// The sweep runs on an Engine of its own (make_batch_sweep_engine: a KV cache
// for kMaxSweepBatch sequences, sharing the weights already loaded), so a
// session's KV cache and lanes are never touched. No GUI, no backend factory:
// the caller builds the backend.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace ts {

constexpr int kMaxSweepBatch = 64;

struct BatchSweepOptions {
  std::vector<int> batches = {1, 2, 4, 8, 16, 32, 64};  // each 1..kMaxSweepBatch
  int context = 32;  // cached tokens of every sequence before the measured steps
  int steps = 5;     // timed decode steps per batch size (median reported), after one untimed
};

// One batch size's measurement.
struct BatchSweepPoint {
  int batch = 0;
  double seconds = 0;  // median wall time of one batched decode step
  double tokens_per_second = 0;
  StepCost cost;           // the step's FLOPs and bytes (the cost model's, for this batch)
  double intensity = 0;    // FLOPs per byte
  double flops_per_s = 0;  // achieved
  double roof = 0;         // min(bandwidth * intensity, peak)
  double fraction_of_roof = 0;
  bool compute_roof = false;  // the roof there is the compute flat (intensity >= ridge)
};

struct BatchSweepResult {
  double peak_flops = 0;  // FLOP/s
  double bandwidth = 0;   // bytes/s
  double ridge = 0;       // peak_flops / bandwidth, FLOPs per byte
  int context = 0;
  // The batch (real) at which the cost model's intensity reaches the ridge;
  // < 0 when it never does (its limit for large batches stays below the ridge).
  double predicted_crossing = -1;
  std::vector<BatchSweepPoint> points;  // in the order measured
  // The first measured batch (in increasing B) whose step is compute bound
  // (its intensity at or past the ridge); 0 when none is.
  int first_compute_bound = 0;
  // "none up to 64" or "B = 16": for a report.
  std::string first_compute_bound_text() const;
};

// The cost of one decode step of `batch` sequences, each with `context`
// cached tokens: estimate_step_cost for that batch.
StepCost batch_step_cost(const ModelConfig& config, int batch, int context, WeightFormat format,
                         WeightFormat kv_format);

// Where the intensity of batch_step_cost reaches `ridge`, as a real batch
// size (flops and bytes are affine in B); -1 when it never does.
double predicted_crossing_batch(const ModelConfig& config, int context, WeightFormat format,
                                WeightFormat kv_format, double ridge);

// The KV capacity (tokens) a sweep engine needs for these options.
int batch_sweep_cache_tokens(const BatchSweepOptions& options, int block_size = 16);

// An engine for the sweep: `backend` (a fresh one, on the same weights) with a
// KV cache for kMaxSweepBatch sequences of the options' length.
std::unique_ptr<Engine> make_batch_sweep_engine(std::shared_ptr<const ModelWeights> weights,
                                                std::unique_ptr<Backend> backend,
                                                const BatchSweepOptions& options,
                                                WeightFormat kv_format = WeightFormat::kF32);

// `batch` new sequences on engine, each holding the same `context` tokens
// (drawn from `seed`) in KV blocks of its own: the first is prefilled, the
// others get copies of its blocks (no sharing, so each step reads every
// sequence's own KV). The caller releases them.
std::vector<SeqId> make_sweep_sequences(Engine& engine, int batch, int context, uint32_t seed = 7);

// Throws ts::Error (one line) for a batch outside 1..kMaxSweepBatch, an empty
// list, or a context the model cannot hold with the steps after it.
void check_batch_sweep(const BatchSweepOptions& options, int n_ctx);

// Measures one batch size: sequences made, one untimed step, options.steps
// timed ones, sequences released (also when a step throws). When *cancel
// turns true between two steps it stops there and returns a point with no
// time (seconds 0), not to be reported.
BatchSweepPoint measure_batch(Engine& engine, int batch, const BatchSweepOptions& options,
                              double peak_flops, double bandwidth,
                              const std::atomic<bool>* cancel = nullptr);

// Fills the roof fields of p from the roofs.
void place_on_roofs(BatchSweepPoint& p, double peak_flops, double bandwidth);

// The summary fields (ridge, crossing, first compute-bound batch) of r from
// its points and roofs.
void summarize_batch_sweep(BatchSweepResult& r, const ModelConfig& config, WeightFormat format,
                           WeightFormat kv_format);

// The whole sweep on engine, in the options' order; stops early (with the
// points measured so far) when *cancel turns true.
BatchSweepResult run_batch_sweep(Engine& engine, const BatchSweepOptions& options,
                                 double peak_flops, double bandwidth,
                                 const std::atomic<bool>* cancel = nullptr);

}  // namespace ts
