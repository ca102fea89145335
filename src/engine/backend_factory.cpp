#include "engine/backend_factory.h"

#include <algorithm>
#include <thread>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/machine_probe.h"
#include "util/error.h"
#ifdef TS_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

namespace ts {

BackendSelection make_backend(const std::string& device,
                              std::shared_ptr<const ModelWeights> weights, int cpu_threads) {
  if (device != "auto" && device != "cpu" && device != "cuda")
    throw Error("--device must be auto, cpu or cuda (got '" + device + "')");
  BackendSelection sel;
  if (device != "cpu") {
#ifdef TS_HAVE_CUDA
    std::string why;
    sel.backend = make_cuda_backend(weights, &why);
    if (sel.backend) return sel;
    if (device == "cuda") throw Error("CUDA backend unavailable: " + why);
    sel.notice = "no usable CUDA device (" + why + "); running on the CPU";
#else
    if (device == "cuda")
      throw Error("this build has no CUDA backend (configure with the CUDA toolkit)");
    sel.notice = "built without CUDA; running on the CPU";
#endif
  }
  sel.backend = make_cpu_backend(std::move(weights), cpu_threads);
  return sel;
}

HardwareRoofs measure_roofs(const Backend& backend, int cpu_threads, double working_set_bytes) {
  HardwareRoofs roofs;
#ifdef TS_HAVE_CUDA
  if (backend.name() == "cuda") {
    roofs.how = measure_cuda_roofs(&roofs.peak_flops, &roofs.bandwidth);
    return roofs;
  }
#endif
  (void)backend;
  const int threads = cpu_threads > 0
                          ? cpu_threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  constexpr long long kMainMemoryProbe = 256ll << 20;
  const cpu::MachineRoofs m = cpu::measure_machine(threads, kMainMemoryProbe);
  if (working_set_bytes > 0 && working_set_bytes * 4 < kMainMemoryProbe) {
    roofs.working_set_bytes = working_set_bytes;
    roofs.working_set_bandwidth =
        cpu::measure_read_bandwidth(static_cast<long long>(working_set_bytes), threads);
  }
  roofs.peak_flops = m.peak_flops;
  roofs.bandwidth = m.read_bandwidth;
  roofs.how = "measured at start-up on " + std::to_string(m.threads) +
              " CPU threads: independent FMA chains, streaming read of 256 MB";
  return roofs;
}

cpu::MachineRoofs measure_bench_roofs(const Backend& backend, int cpu_threads) {
#ifdef TS_HAVE_CUDA
  if (backend.name() == "cuda") {
    cpu::MachineRoofs r;
    measure_cuda_roofs(&r.peak_flops, &r.read_bandwidth);
    return r;
  }
#endif
  (void)backend;
  return cpu::measure_machine(cpu_threads);
}

double measure_bench_bandwidth(const Backend& backend, int cpu_threads) {
#ifdef TS_HAVE_CUDA
  if (backend.name() == "cuda") {
    double flops = 0, bandwidth = 0;
    measure_cuda_roofs(&flops, &bandwidth);
    return bandwidth;
  }
#endif
  (void)backend;
  return cpu::measure_read_bandwidth(512ll << 20, cpu_threads);
}

}  // namespace ts
