#include "bench/timing.h"

#include <sys/resource.h>

#include <algorithm>
#include <random>

namespace ts::bench {

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

long minor_page_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

DecodeTiming decode_step_time(ts::Engine& engine, int context, int decode_steps, int lanes,
                              bool trace, ts::cpu::ReadBandwidthProbe* probe) {
  auto& cache = engine.cache();
  const int v = engine.config().vocab_size;
  std::vector<double> times, bandwidths;
  ts::StepCost cost;
  double first_pass_median = 0;
  long first_pass_faults = 0, faults = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const ts::SeqId base = cache.create();
    engine.forward({{base, random_tokens(context, v, 2)}}, {});
    std::vector<ts::SeqId> seqs = {base};
    for (int i = 1; i < lanes; ++i) seqs.push_back(cache.fork(base));
    times.clear();
    bandwidths.clear();
    faults = 0;
    std::mt19937 rng(3);
    const int steps = std::min(decode_steps, engine.config().n_ctx - context);
    for (int s = 0; s < steps; ++s) {
      if (probe) bandwidths.push_back(probe->pass());
      std::vector<ts::ForwardRequest> reqs;
      for (ts::SeqId q : seqs) reqs.push_back({q, {static_cast<int>(rng() % v)}});
      const long faults_before = minor_page_faults();
      ts::ForwardResult r = engine.forward(reqs, trace_options(trace));
      faults += minor_page_faults() - faults_before;
      times.push_back(r.seconds);
      cost = r.cost;
    }
    for (ts::SeqId q : seqs) cache.release(q);
    if (pass == 0) {
      first_pass_median = median(times);
      first_pass_faults = faults;
    }
  }
  DecodeTiming t{median(times), *std::min_element(times.begin(), times.end()), cost};
  t.first_pass_median = first_pass_median;
  t.first_pass_page_faults = first_pass_faults;
  t.page_faults = faults;
  if (!bandwidths.empty()) {
    t.bandwidth_best = *std::max_element(bandwidths.begin(), bandwidths.end());
    t.bandwidth_median = median(bandwidths);
  }
  return t;
}

}  // namespace ts::bench
