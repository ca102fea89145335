#include "bench/runs.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <utility>
#include <vector>

#include "bench/formats_bench.h"
#include "bench/lookahead_bench.h"
#include "bench/random_checkpoint.h"
#include "bench/speculative_bench.h"
#include "bench/timing.h"
#include "engine/backend_factory.h"
#include "engine/batch_sweep.h"
#include "engine/cpu/machine_probe.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_blocks.h"
#include "model/model_loader.h"
#include "session/cache_comparison.h"
#include "session/memory_report.h"
#include "util/error.h"
#include "util/paths.h"

namespace ts::bench {
namespace {

using nlohmann::json;

json bench_prefill(ts::Engine& engine, const BenchOptions& o, const ts::cpu::MachineRoofs& roofs,
                   bool trace) {
  const auto tokens = random_tokens(o.prefill_tokens, engine.config().vocab_size, 1);
  std::vector<double> times;
  // One untimed run first: the forward right after the roofs' 512 MB probe
  // buffer is freed is slower than a settled one (docs/performance.md); what
  // a front end's first step costs after loading is ts_first_step's
  // measurement (tests/soak), not this one.
  ts::ForwardResult r = engine.forward_scratch(tokens, trace_options(trace));
  for (int i = 0; i < 3; ++i) {
    r = engine.forward_scratch(tokens, trace_options(trace));
    times.push_back(r.seconds);
  }
  const double t = median(times);
  return {{"tokens", o.prefill_tokens},
          {"trace", trace},
          {"seconds", t},
          {"tokens_per_second", o.prefill_tokens / t},
          {"gflops", r.cost.flops / t * 1e-9},
          {"fraction_of_peak_flops", r.cost.flops / t / roofs.peak_flops}};
}

// The decode section: one step of one sequence after o.context cached
// tokens, without and with the trace, each divided by the memory bound.
json bench_decode(ts::Engine& engine, const BenchOptions& o) {
  json decode = json::array();
  // On the CPU one probe pass runs before every decode step, so that the
  // steps and the bound they are divided by see the same neighbours on a
  // shared machine; best step over best pass, median over median. (A
  // GPU's bandwidth is probed once, right before the steps.)
  std::unique_ptr<ts::cpu::ReadBandwidthProbe> probe;
  if (engine.backend().name() == "cpu")
    probe = std::make_unique<ts::cpu::ReadBandwidthProbe>(512ll << 20, o.setup.cpu_threads);
  for (bool trace : {false, true}) {
    const double probed =
        probe ? 0 : ts::measure_bench_bandwidth(engine.backend(), o.setup.cpu_threads);
    const DecodeTiming t =
        decode_step_time(engine, o.context, o.decode_steps, 1, trace, probe.get());
    const double bandwidth = probe ? t.bandwidth_best : probed;
    const double bandwidth_median = probe ? t.bandwidth_median : probed;
    const double bound = t.cost.bytes() / bandwidth;
    const double bound_median = t.cost.bytes() / bandwidth_median;
    const double weight_bound = t.cost.weight_bytes / bandwidth;
    const double weight_bound_median = t.cost.weight_bytes / bandwidth_median;
    decode.push_back({{"trace", trace},
                      {"context", o.context},
                      {"read_bandwidth_gb_per_s", bandwidth * 1e-9},
                      {"read_bandwidth_median_gb_per_s", bandwidth_median * 1e-9},
                      {"bandwidth_probe", probe ? "one pass before every step" : "once"},
                      {"ms_per_step_median", t.median * 1e3},
                      {"ms_per_step_best", t.best * 1e3},
                      {"bytes_per_step", t.cost.bytes()},
                      {"memory_bound_ms", bound * 1e3},
                      {"ratio_to_memory_bound_median", t.median / bound_median},
                      {"ratio_to_memory_bound_best", t.best / bound},
                      {"weights_only_bound_ms", weight_bound * 1e3},
                      {"ratio_to_weight_read_median", t.median / weight_bound_median},
                      {"ratio_to_weight_read_best", t.best / weight_bound},
                      {"page_faults", t.page_faults},
                      {"first_pass_ms_per_step_median", t.first_pass_median * 1e3},
                      {"first_pass_page_faults", t.first_pass_page_faults}});
  }
  return decode;
}

// The lanes section: one decode step of each lane count in --lanes, beside
// the 1-lane time.
json bench_lanes(ts::Engine& engine, const BenchOptions& o) {
  json lanes = json::array();
  // ratio_to_one_lane divides by the 1-lane time whatever the list's order;
  // it is measured first when the list does not name 1.
  std::vector<DecodeTiming> timings;
  double one_lane = 0;
  for (int k : o.lanes) {
    timings.push_back(decode_step_time(engine, o.context, o.decode_steps, k, false));
    if (k == 1 && one_lane == 0) one_lane = timings.back().median;
  }
  if (one_lane == 0)
    one_lane = decode_step_time(engine, o.context, o.decode_steps, 1, false).median;
  for (size_t i = 0; i < o.lanes.size(); ++i) {
    const int k = o.lanes[i];
    const DecodeTiming& t = timings[i];
    lanes.push_back({{"lanes", k},
                     {"ms_per_step", t.median * 1e3},
                     {"ratio_to_one_lane", t.median / one_lane},
                     {"flops_per_byte", t.cost.intensity()},
                     {"gflops", t.cost.flops / t.median * 1e-9}});
  }
  return lanes;
}

// Greedy generation of n tokens with and without the KV cache: same tokens,
// measured totals (session/cache_comparison).
json cache_compare(ts::Engine& engine, int n) {
  const std::vector<int> prompt = random_tokens(8, engine.config().vocab_size, 4);
  return ts::cache_comparison_to_json(ts::compare_kv_cache(engine, prompt, {}, n));
}

// The batch sweep (engine/batch_sweep.h) on an engine of its own: a fresh
// backend on the loaded weights, with a KV cache for the largest batch.
json bench_batch_sweep(const ts::Engine& engine, const BenchOptions& o,
                       const ts::cpu::MachineRoofs& roofs) {
  ts::BatchSweepOptions so;
  so.batches = o.batch_sweep;
  so.context = std::min(so.context, engine.config().n_ctx / 2);
  const ts::WeightFormat kv = engine.cache().shape().format;
  ts::BackendSelection sel =
      ts::make_backend(engine.backend().name(), engine.shared_weights(), o.setup.cpu_threads, kv);
  const std::unique_ptr<ts::Engine> sweep =
      ts::make_batch_sweep_engine(engine.shared_weights(), std::move(sel.backend), so, kv);
  const ts::BatchSweepResult r =
      ts::run_batch_sweep(*sweep, so, roofs.peak_flops, roofs.read_bandwidth);
  json points = json::array();
  for (const ts::BatchSweepPoint& p : r.points)
    points.push_back({{"batch", p.batch},
                      {"ms_per_step", p.seconds * 1e3},
                      {"tokens_per_second", p.tokens_per_second},
                      {"flops_per_step", p.cost.flops},
                      {"bytes_per_step", p.cost.bytes()},
                      {"weight_bytes", p.cost.weight_bytes},
                      {"kv_bytes", p.cost.kv_read_bytes + p.cost.kv_write_bytes},
                      {"flops_per_byte", p.intensity},
                      {"gflops", p.flops_per_s * 1e-9},
                      {"roof_gflops", p.roof * 1e-9},
                      {"fraction_of_roof", p.fraction_of_roof},
                      {"roof", p.compute_roof ? "compute" : "memory"}});
  return {{"context", r.context},
          {"steps_per_batch", so.steps},
          {"read_bandwidth_gb_per_s", r.bandwidth * 1e-9},
          {"peak_gflops", r.peak_flops * 1e-9},
          {"ridge_flops_per_byte", r.ridge},
          {"predicted_crossing_batch",
           r.predicted_crossing < 0 ? json(nullptr) : json(r.predicted_crossing)},
          {"first_compute_bound_batch",
           r.first_compute_bound > 0 ? json(r.first_compute_bound) : json(nullptr)},
          {"first_compute_bound", r.first_compute_bound_text()},
          {"points", points}};
}

}  // namespace

// The model benchmarked: --model, the random checkpoint written first for
// --write-random-*, or else the bundled model, as the other front ends.
std::string bench_model_dir(const BenchOptions& o) {
  if (!o.write_random.empty()) {
    write_random_checkpoint(
        o.random_shape == "--write-random-1.5b" ? gpt2_1558m_config() : gpt2_124m_config(),
        o.write_random, 124);
    return o.write_random;
  }
  if (!o.setup.model.empty()) return o.setup.model.string();
  const std::filesystem::path bundled = ts::default_model_path();
  std::error_code ec;
  if (!std::filesystem::exists(bundled, ec))
    throw ts::Error("bundled model not found at " + bundled.string() +
                    ": pass --model DIR, --write-random-124m DIR or --write-random-1.5b DIR");
  return bundled.string();
}

json bench_model(BenchOptions o, const std::string& model_dir, bool& identical) {
  const auto load_start = std::chrono::steady_clock::now();
  auto weights = std::make_shared<const ts::ModelWeights>(
      ts::convert_weights(ts::load_model(model_dir), o.setup.weights));
  const int n_ctx = weights->config.n_ctx;
  fit_to_context(o, n_ctx, model_dir);
  ts::BackendSelection sel =
      ts::make_backend(o.setup.device, weights, o.setup.cpu_threads, o.setup.kv);
  if (!sel.notice.empty()) std::cerr << "note: " << sel.notice << "\n";
  int max_lanes = 1;
  for (int k : o.lanes) max_lanes = std::max(max_lanes, k);
  // Every lane's sequence may own whole blocks up to the context (plus the
  // shared base and one scratch sequence): sized in blocks, not tokens.
  const ts::KvCacheSize kv =
      ts::kv_cache_size_for(weights->config, max_lanes + 2, 16, sel.backend.get(), o.setup.kv);
  ts::Engine engine(weights, std::move(sel.backend), kv.tokens, 16, o.setup.kv);
  const ts::ModelConfig& cfg = engine.config();
  // Weights read into memory (or a populated map), backend and KV pool set up.
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const json memory_after_load = ts::memory_report_json(ts::memory_report(engine));

  const ts::cpu::MachineRoofs roofs =
      ts::measure_bench_roofs(engine.backend(), o.setup.cpu_threads);
  const bool f32 = weights->format == ts::WeightFormat::kF32;
  const char* kernel = f32 ? ts::cpu::decode_kernel()
                       : ts::is_block_format(weights->format)
                           ? ts::cpu::block_kernel(std::string(ts::cpu::half_kernel()) != "scalar")
                           : ts::cpu::half_kernel();
  json report = {{"model", model_dir},
                 {"parameters", cfg.parameter_count()},
                 {"weight_bytes_fp32", cfg.parameter_count() * 4},
                 {"weights", ts::weight_format_name(weights->format)},
                 {"kv", ts::weight_format_name(o.setup.kv)},
                 {"backend", engine.backend().name()},
                 {"device", engine.backend().device_name()},
                 {"machine",
                  {{"read_bandwidth_gb_per_s", roofs.read_bandwidth * 1e-9},
                   {"peak_gflops", roofs.peak_flops * 1e-9},
                   {"threads", roofs.threads},
                   {"cpu_decode_kernel", kernel}}},
                 {"load_seconds", load_seconds}};
  report["prefill"] = {bench_prefill(engine, o, roofs, false),
                       bench_prefill(engine, o, roofs, true)};
  report["decode"] = bench_decode(engine, o);
  report["lanes"] = bench_lanes(engine, o);
  if (!o.batch_sweep.empty()) report["batch_sweep"] = bench_batch_sweep(engine, o, roofs);
  json compare = json::array();
  for (int n : o.cache_compare) compare.push_back(cache_compare(engine, n));
  if (!compare.empty()) report["kv_cache_on_vs_off"] = compare;
  if (!o.draft_model.empty() || o.spec_self_draft)
    report["speculative"] = bench_speculative(o, model_dir, identical);
  if (o.lookahead_tokens > 0)
    report["lookahead"] = bench_lookahead(engine, model_dir, roofs, o.lookahead_tokens, identical);
  if (!o.formats.empty())  // on the weights loaded above when they are f32
    report["formats"] =
        bench_formats(o, model_dir, weights->format == ts::WeightFormat::kF32 ? weights : nullptr);
  report["device_after_run"] = engine.backend().device_name();  // e.g. graphs captured
  // Where memory goes (session/memory_report.h): after loading, and after
  // every measurement above (their sequences released; the KV pool's pages
  // written so far stay resident and are reused).
  report["memory"] = {{"after_load", memory_after_load},
                      {"after_run", ts::memory_report_json(ts::memory_report(engine))}};
  return report;
}

}  // namespace ts::bench
