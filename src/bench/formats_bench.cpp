#include "bench/formats_bench.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/timing.h"
#include "engine/backend_factory.h"
#include "engine/cpu/machine_probe.h"
#include "engine/engine.h"
#include "model/model_loader.h"
#include "util/error.h"

namespace ts::bench {

using nlohmann::json;

json bench_formats(const BenchOptions& o, const std::string& model_dir,
                   std::shared_ptr<const ModelWeights> f32) {
  const std::vector<WeightFormat>& formats = o.formats;
  bool block = false;
  for (WeightFormat f : formats) block = block || is_block_format(f);
  // Every engine on one kind of device, so that their steps compare: the
  // CPU when a block format is listed (the CUDA backend reads only f32,
  // bf16 and f16), as the precision comparison does.
  const std::string device = o.setup.device == "auto" && block ? "cpu" : o.setup.device;

  // The checkpoint is read once (or not at all when the caller holds it in
  // f32): f32 runs on it as read, each other format on a converted copy.
  const std::shared_ptr<const ModelWeights> loaded =
      f32 ? std::move(f32) : std::make_shared<const ModelWeights>(load_model(model_dir));
  struct Run {
    WeightFormat format = WeightFormat::kF32;
    std::unique_ptr<Engine> engine;
    SeqId seq = -1;
    std::vector<double> seconds;
    StepCost cost;
  };
  std::vector<Run> runs;
  std::vector<std::string> notices;
  for (WeightFormat f : formats) {
    auto weights = f == WeightFormat::kF32
                       ? loaded
                       : std::make_shared<const ModelWeights>(convert_weights(*loaded, f));
    BackendSelection sel = make_backend(device, weights, o.setup.cpu_threads, o.setup.kv);
    if (!sel.notice.empty() &&
        std::find(notices.begin(), notices.end(), sel.notice) == notices.end()) {
      std::cerr << "note: " << sel.notice << "\n";  // once, not once per format
      notices.push_back(sel.notice);
    }
    const KvCacheSize kv = kv_cache_size_for(weights->config, 1, 16, sel.backend.get(), o.setup.kv);
    Run r;
    r.format = f;
    r.engine = std::make_unique<Engine>(weights, std::move(sel.backend), kv.tokens, 16, o.setup.kv);
    runs.push_back(std::move(r));
  }
  const Engine& first = *runs.front().engine;
  const int vocab = first.config().vocab_size;
  // The same cached tokens in every engine (the decode section's), so a
  // format's step costs what a --weights run of it counts at that context.
  const std::vector<int> context = random_tokens(o.context, vocab, 2);
  for (Run& r : runs) {
    r.seq = r.engine->cache().create();
    r.engine->forward({{r.seq, context}}, {});
  }
  // On the CPU one probe pass before every round (the decode section's
  // rule), so that the bound moves with the machine; a GPU is probed once.
  std::unique_ptr<cpu::ReadBandwidthProbe> probe;
  const bool cpu = first.backend().name() == "cpu";
  if (cpu) probe = std::make_unique<cpu::ReadBandwidthProbe>(512ll << 20, o.setup.cpu_threads);
  const double probed = cpu ? 0 : measure_bench_bandwidth(first.backend(), o.setup.cpu_threads);
  std::vector<double> bandwidths;
  const int rounds = std::min(o.decode_steps, first.config().n_ctx - o.context);
  const int n = static_cast<int>(runs.size());
  std::mt19937 rng(3);
  for (int s = 0; s < rounds; ++s) {
    bandwidths.push_back(probe ? probe->pass() : probed);
    const int token = static_cast<int>(rng() % static_cast<unsigned>(vocab));
    // Round s starts at format s mod n: none is always the one right after
    // the probe (or right after another format's step).
    for (int i = 0; i < n; ++i) {
      Run& r = runs[static_cast<size_t>((s + i) % n)];
      // Each engine has a pool of its own, whose workers spin for a while
      // after its step: a pause lets them sleep, so that no step shares the
      // cores with the last one's spinning workers, and each starts as the
      // decode section's do (after the probe pass, its workers asleep).
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const ForwardResult res = r.engine->forward({{r.seq, {token}}}, {});
      r.seconds.push_back(res.seconds);
      r.cost = res.cost;
    }
  }
  const double bandwidth = median(bandwidths);
  const double first_median = median(runs.front().seconds);
  json out = json::array();
  for (const Run& r : runs) {
    // Step by step against the first format's step of the same round.
    std::vector<double> paired;
    for (size_t s = 0; s < r.seconds.size(); ++s)
      paired.push_back(r.seconds[s] / runs.front().seconds[s]);
    const double step = median(r.seconds);
    const double bound = r.cost.bytes() / bandwidth;
    out.push_back(
        {{"weights", weight_format_name(r.format)},
         {"ms_per_step_median", step * 1e3},
         {"ms_per_step_best", *std::min_element(r.seconds.begin(), r.seconds.end()) * 1e3},
         {"bytes_per_step", r.cost.bytes()},
         {"weight_bytes_per_step", r.cost.weight_bytes},
         {"memory_bound_ms", bound * 1e3},
         {"ratio_to_memory_bound_median", step / bound},
         {"ratio_to_first_median", step / first_median},
         {"ratio_to_first_paired_median", median(paired)}});
  }
  for (Run& r : runs) r.engine->cache().release(r.seq);
  return {{"context", o.context},
          {"rounds", rounds},
          {"device", first.backend().device_name()},
          {"kv", weight_format_name(o.setup.kv)},
          {"read_bandwidth_median_gb_per_s", bandwidth * 1e-9},
          {"bandwidth_probe", probe ? "one pass before every round" : "once"},
          {"first", weight_format_name(formats.front())},
          {"formats", out}};
}

}  // namespace ts::bench
