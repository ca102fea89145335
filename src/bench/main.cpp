// tokenscope-bench: prefill and decode speed of a model on a backend, each
// figure printed beside the physical bound measured in the same run.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench/random_checkpoint.h"
#include "engine/backend_factory.h"
#include "engine/cpu/machine_probe.h"
#include "engine/engine.h"
#include "model/model_loader.h"
#include "session/cache_comparison.h"
#include "util/error.h"

namespace {

using nlohmann::json;

struct BenchOptions {
  std::string model;
  std::string write_random;  // write a random GPT-2-124M here, then bench it
  std::string device = "auto";
  int threads = 0;
  int prefill_tokens = 128;
  int context = 64;  // cached tokens before the decode steps
  int decode_steps = 20;
  std::vector<int> lanes = {1, 2, 4, 8};
  std::vector<int> cache_compare;  // generation lengths for KV cache on vs off
};

const char* kHelp = R"(tokenscope-bench: prefill and decode speed, printed as JSON with the bounds
measured in the same run (memory read bandwidth, peak FMA throughput).

  --model DIR              model to benchmark (HF GPT-2 directory or llm.c .bin)
  --write-random-124m DIR  write a random GPT-2-124M-shaped checkpoint to DIR and use it
  --device auto|cpu|cuda   backend (default auto)
  --threads N              CPU threads (default: all)
  --prefill-tokens N       prompt length of the prefill measurement (default 128)
  --context N              cached tokens before the decode measurement (default 64)
  --decode-steps N         decode steps measured (median reported; default 20)
  --lanes LIST             lane counts for the batched decode, e.g. 1,2,4,8 (default)
  --cache-compare LIST     generation lengths for KV cache on vs off, e.g. 64,256
  --help                   this text
)";

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t comma = s.find(',', pos);
    const std::string item =
        s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    try {
      out.push_back(std::stoi(item));
    } catch (...) {
      throw ts::Error("not a number list: '" + s + "'");
    }
    if (out.back() <= 0) throw ts::Error("list values must be positive: '" + s + "'");
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

int parse_int(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const int n = std::stoi(v, &used);
    if (used == v.size() && n >= 0) return n;
  } catch (...) {
  }
  throw ts::Error(flag + ": '" + v + "' is not a non-negative integer");
}

BenchOptions parse(int argc, char** argv) {
  BenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw ts::Error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::cout << kHelp;
      std::exit(0);
    } else if (a == "--model")
      o.model = next();
    else if (a == "--write-random-124m")
      o.write_random = next();
    else if (a == "--device")
      o.device = next();
    else if (a == "--threads")
      o.threads = parse_int(a, next());
    else if (a == "--prefill-tokens")
      o.prefill_tokens = parse_int(a, next());
    else if (a == "--context")
      o.context = parse_int(a, next());
    else if (a == "--decode-steps")
      o.decode_steps = parse_int(a, next());
    else if (a == "--lanes")
      o.lanes = parse_list(next());
    else if (a == "--cache-compare")
      o.cache_compare = parse_list(next());
    else
      throw ts::Error("unknown option '" + a + "' (see --help)");
  }
  if (o.model.empty() && o.write_random.empty())
    throw ts::Error("give --model DIR or --write-random-124m DIR");
  if (o.decode_steps < 1 || o.prefill_tokens < 1 || o.context < 1)
    throw ts::Error("--decode-steps, --prefill-tokens and --context must be >= 1");
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<int> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> t(n);
  for (int& x : t) x = static_cast<int>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

ts::ForwardOptions trace_options(bool trace) {
  ts::ForwardOptions f;
  f.record_attention = trace;
  f.record_residuals = trace;
  return f;
}

json bench_prefill(ts::Engine& engine, const BenchOptions& o, const ts::cpu::MachineRoofs& roofs,
                   bool trace) {
  const auto tokens = random_tokens(o.prefill_tokens, engine.config().vocab_size, 1);
  std::vector<double> times;
  ts::ForwardResult r;
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

struct DecodeTiming {
  double median = 0;  // seconds
  double best = 0;    // fastest step: the least disturbed by other work on a shared machine
  ts::StepCost cost;
};

// Seconds of one decode step for `lanes` sequences forked from a shared
// context, and the step's analytic cost.
DecodeTiming decode_step_time(ts::Engine& engine, const BenchOptions& o, int lanes, bool trace) {
  auto& cache = engine.cache();
  const int v = engine.config().vocab_size;
  const ts::SeqId base = cache.create();
  engine.forward({{base, random_tokens(o.context, v, 2)}}, {});
  std::vector<ts::SeqId> seqs = {base};
  for (int i = 1; i < lanes; ++i) seqs.push_back(cache.fork(base));
  std::vector<double> times;
  ts::StepCost cost;
  std::mt19937 rng(3);
  const int steps = std::min(o.decode_steps, engine.config().n_ctx - o.context);
  for (int s = 0; s < steps; ++s) {
    std::vector<ts::ForwardRequest> reqs;
    for (ts::SeqId q : seqs) reqs.push_back({q, {static_cast<int>(rng() % v)}});
    ts::ForwardResult r = engine.forward(reqs, trace_options(trace));
    times.push_back(r.seconds);
    cost = r.cost;
  }
  for (ts::SeqId q : seqs) cache.release(q);
  return {median(times), *std::min_element(times.begin(), times.end()), cost};
}

// Greedy generation of n tokens with and without the KV cache: same tokens,
// measured totals (session/cache_comparison).
json cache_compare(ts::Engine& engine, int n) {
  const std::vector<int> prompt = random_tokens(8, engine.config().vocab_size, 4);
  return ts::cache_comparison_to_json(ts::compare_kv_cache(engine, prompt, {}, n));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const BenchOptions o = parse(argc, argv);
    std::string model_dir = o.model;
    if (!o.write_random.empty()) {
      ts::bench::write_random_checkpoint(ts::bench::gpt2_124m_config(), o.write_random, 124);
      model_dir = o.write_random;
    }
    auto weights = std::make_shared<const ts::ModelWeights>(ts::load_model(model_dir));
    ts::BackendSelection sel = ts::make_backend(o.device, weights, o.threads);
    if (!sel.notice.empty()) std::cerr << "note: " << sel.notice << "\n";
    int max_lanes = 1;
    for (int k : o.lanes) max_lanes = std::max(max_lanes, k);
    ts::Engine engine(weights, std::move(sel.backend), weights->config.n_ctx * (max_lanes + 2));
    const ts::ModelConfig& cfg = engine.config();
    if (o.context + 1 > cfg.n_ctx || o.prefill_tokens > cfg.n_ctx)
      throw ts::Error("--context / --prefill-tokens exceed the model's context of " +
                      std::to_string(cfg.n_ctx));

    const ts::cpu::MachineRoofs roofs = ts::measure_bench_roofs(engine.backend(), o.threads);
    json report = {{"model", model_dir},
                   {"parameters", cfg.parameter_count()},
                   {"weight_bytes_fp32", cfg.parameter_count() * 4},
                   {"backend", engine.backend().name()},
                   {"device", engine.backend().device_name()},
                   {"machine",
                    {{"read_bandwidth_gb_per_s", roofs.read_bandwidth * 1e-9},
                     {"peak_gflops", roofs.peak_flops * 1e-9},
                     {"threads", roofs.threads}}}};
    report["prefill"] = {bench_prefill(engine, o, roofs, false),
                         bench_prefill(engine, o, roofs, true)};
    json decode = json::array();
    for (bool trace : {false, true}) {
      // Bandwidth is probed again right before the steps it bounds: on a
      // shared machine both figures then see the same neighbours.
      const double bandwidth = ts::measure_bench_bandwidth(engine.backend(), o.threads);
      const DecodeTiming t = decode_step_time(engine, o, 1, trace);
      const double bound = t.cost.bytes() / bandwidth;
      const double weight_bound = t.cost.weight_bytes / bandwidth;
      decode.push_back({{"trace", trace},
                        {"context", o.context},
                        {"read_bandwidth_gb_per_s", bandwidth * 1e-9},
                        {"ms_per_step_median", t.median * 1e3},
                        {"ms_per_step_best", t.best * 1e3},
                        {"bytes_per_step", t.cost.bytes()},
                        {"memory_bound_ms", bound * 1e3},
                        {"ratio_to_memory_bound_median", t.median / bound},
                        {"ratio_to_memory_bound_best", t.best / bound},
                        {"weights_only_bound_ms", weight_bound * 1e3},
                        {"ratio_to_weight_read_median", t.median / weight_bound},
                        {"ratio_to_weight_read_best", t.best / weight_bound}});
    }
    report["decode"] = decode;
    json lanes = json::array();
    double one_lane = 0;
    for (int k : o.lanes) {
      const DecodeTiming t = decode_step_time(engine, o, k, false);
      if (k == 1 || one_lane == 0) one_lane = t.median;
      lanes.push_back({{"lanes", k},
                       {"ms_per_step", t.median * 1e3},
                       {"ratio_to_one_lane", t.median / one_lane},
                       {"flops_per_byte", t.cost.intensity()},
                       {"gflops", t.cost.flops / t.median * 1e-9}});
    }
    report["lanes"] = lanes;
    json compare = json::array();
    for (int n : o.cache_compare) compare.push_back(cache_compare(engine, n));
    if (!compare.empty()) report["kv_cache_on_vs_off"] = compare;
    report["device_after_run"] = engine.backend().device_name();  // e.g. graphs captured
    std::cout << report.dump(2) << std::endl;
    return 0;
  } catch (const ts::Error& e) {
    std::cerr << "tokenscope-bench: " << e.what() << "\n";
    return 2;
  }
}
