#include "engine/cpu/machine_probe.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "util/thread_pool.h"

namespace ts::cpu {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

float sum_range(const float* p, long long n) {
#if defined(__AVX2__) && defined(__FMA__)
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  long long i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float s = 0;
  for (float v : out) s += v;
  for (; i < n; ++i) s += p[i];
  return s;
#else
  float s = 0;
  for (long long i = 0; i < n; ++i) s += p[i];
  return s;
#endif
}

}  // namespace

struct ReadBandwidthProbe::State {
  State(long long bytes, int threads)
      : n(bytes / static_cast<long long>(sizeof(float))),
        buffer(static_cast<size_t>(n), 1.0f),  // touched: pages are resident
        pool(threads),
        sink(static_cast<size_t>(pool.size() * 8)) {}
  long long n;
  std::vector<float> buffer;
  ThreadPool pool;
  std::vector<float> sink;
};

ReadBandwidthProbe::ReadBandwidthProbe(long long bytes, int threads)
    : state_(new State(bytes, threads)) {}

ReadBandwidthProbe::~ReadBandwidthProbe() { delete state_; }

double ReadBandwidthProbe::pass() {
  State& s = *state_;
  const int tasks = static_cast<int>(s.sink.size());
  const auto t0 = std::chrono::steady_clock::now();
  s.pool.parallel_for(tasks, [&](int t) {
    const long long begin = s.n * t / tasks, end = s.n * (t + 1) / tasks;
    s.sink[t] = sum_range(s.buffer.data() + begin, end - begin);
  });
  const double seconds = seconds_since(t0);
  volatile float keep = s.sink[0];
  (void)keep;
  return static_cast<double>(s.n) * sizeof(float) / seconds;
}

double measure_read_bandwidth(long long bytes, int threads, int repeats) {
  ReadBandwidthProbe probe(bytes, threads);
  double best = 0;
  for (int r = 0; r < repeats; ++r) best = std::max(best, probe.pass());
  return best;
}

double measure_peak_flops(int threads) {
  ThreadPool pool(threads);
  constexpr long long kIterations = 20'000'000;
  std::vector<float> sink(pool.size());
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(pool.size(), [&](int t) {
#if defined(__AVX2__) && defined(__FMA__)
      // Ten independent chains hide the FMA latency.
      __m256 acc[10];
      for (int i = 0; i < 10; ++i) acc[i] = _mm256_set1_ps(0.001f * (i + t));
      const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
      for (long long it = 0; it < kIterations / 10; ++it)
        for (int i = 0; i < 10; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
      __m256 s = acc[0];
      for (int i = 1; i < 10; ++i) s = _mm256_add_ps(s, acc[i]);
      alignas(32) float out[8];
      _mm256_store_ps(out, s);
      sink[t] = out[0];
#else
      float acc[8] = {};
      for (long long it = 0; it < kIterations; ++it)
        for (int i = 0; i < 8; ++i) acc[i] = acc[i] * 0.999999f + 1e-7f;
      sink[t] = acc[0];
#endif
    });
    best = std::min(best, seconds_since(t0));
  }
  // Each iteration of the inner loop: 10 FMAs x 8 lanes x 2 FLOPs, per thread.
  const double flops = static_cast<double>(kIterations / 10) * 10 * 8 * 2 * pool.size();
  return flops / best;
}

MachineRoofs measure_machine(int threads, long long bandwidth_bytes) {
  MachineRoofs roofs;
  ThreadPool probe(threads);
  roofs.threads = probe.size();
  roofs.read_bandwidth = measure_read_bandwidth(bandwidth_bytes, threads);
  roofs.peak_flops = measure_peak_flops(threads);
  return roofs;
}

}  // namespace ts::cpu
