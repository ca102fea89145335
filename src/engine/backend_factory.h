#pragma once
// Picks the backend at run time: "auto" takes CUDA when a device answers and
// the CPU otherwise; "cpu" and "cuda" force one. When CUDA was asked for (or
// auto found none) the notice says why in one line.
#include <algorithm>
#include <memory>
#include <string>

#include "engine/backend.h"
#include "engine/cpu/machine_probe.h"
#include "model/weights.h"

namespace ts {

struct BackendSelection {
  std::unique_ptr<Backend> backend;
  std::string notice;  // empty when the wish was met silently
};

// device: "auto", "cpu" or "cuda". Throws ts::Error for any other name, and
// for "cuda" when no CUDA device can be used, the weights are not fp32
// (ModelWeights::format) or the KV cache is not to be fp32 (kv_format, --kv):
// the CUDA backend reads and stores fp32 only; "auto" then takes the CPU and
// says so in the notice.
BackendSelection make_backend(const std::string& device,
                              std::shared_ptr<const ModelWeights> weights, int cpu_threads = 0,
                              WeightFormat kv_format = WeightFormat::kF32);

// backend.measure_roofs: working_set_bytes is the model's weight bytes (0:
// skip that probe). Throws ts::Error when the probe cannot run (e.g. the
// device is out of memory).
inline HardwareRoofs measure_roofs(const Backend& backend, int cpu_threads = 0,
                                   double working_set_bytes = 0) {
  return backend.measure_roofs(cpu_threads, working_set_bytes);
}

// The bounds tokenscope-bench divides a backend's figures by, measured on the
// machine that runs it: for the CPU the streaming read bandwidth and FMA peak
// of `cpu_threads`; for CUDA the device's own copy bandwidth (bytes read +
// written per second) and matmul peak (threads = 0), never the host's.
// (The CPU's bench probe reads 512 MB, twice the window's.)
inline cpu::MachineRoofs measure_bench_roofs(const Backend& backend, int cpu_threads) {
  if (backend.memory().on_host) return cpu::measure_machine(cpu_threads);
  const HardwareRoofs r = backend.measure_roofs(cpu_threads, 0);
  return {r.bandwidth, r.peak_flops, r.threads};
}
// The bandwidth half of measure_bench_roofs alone (re-probed right before a
// measurement it bounds).
inline double measure_bench_bandwidth(const Backend& backend, int cpu_threads) {
  return backend.measure_bandwidth(cpu_threads);
}

}  // namespace ts
