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
// for "cuda" when no CUDA device can be used.
BackendSelection make_backend(const std::string& device,
                              std::shared_ptr<const ModelWeights> weights, int cpu_threads = 0);

// The two roofs of the roofline for the machine that runs a backend: peak
// fp32 FLOP/s and memory bandwidth, measured by a short probe (about a
// second) on that very machine. `how` labels the figures for the user.
struct HardwareRoofs {
  double peak_flops = 0;  // FLOP/s
  double bandwidth = 0;   // bytes/s
  std::string how;        // e.g. "measured at start-up: 2 CPU threads, FMA chains + streaming read"
  // A small model's weights may fit in the CPU's caches, which stream faster
  // than main memory: the bandwidth of a buffer of the weights' size, when
  // that is well below the main-memory probe's (0 otherwise).
  double working_set_bytes = 0;
  double working_set_bandwidth = 0;
  bool valid() const { return peak_flops > 0 && bandwidth > 0; }
  // The bandwidth that bounds a step reading working_set_bytes of weights.
  double effective_bandwidth() const { return std::max(bandwidth, working_set_bandwidth); }
};
// working_set_bytes: the model's weight bytes (0: skip that probe). Throws
// ts::Error when the probe cannot run (e.g. the device is out of memory).
HardwareRoofs measure_roofs(const Backend& backend, int cpu_threads = 0,
                            double working_set_bytes = 0);

// The bounds tokenscope-bench divides a backend's figures by, measured on the
// machine that runs it: for the CPU the streaming read bandwidth and FMA peak
// of `cpu_threads`; for CUDA the device's own copy bandwidth (bytes read +
// written per second) and fp32 SGEMM peak (threads = 0), never the host's.
cpu::MachineRoofs measure_bench_roofs(const Backend& backend, int cpu_threads);
// The bandwidth half of measure_bench_roofs alone (re-probed right before a
// measurement it bounds).
double measure_bench_bandwidth(const Backend& backend, int cpu_threads);

}  // namespace ts
