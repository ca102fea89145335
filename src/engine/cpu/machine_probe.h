#pragma once
// Short measurements of this machine's roofs: how fast the CPU backend can
// stream memory and how many fp32 FLOP/s its cores can issue. Benchmarks
// and the roofline compare every step with these, measured in the same run.

namespace ts::cpu {

struct MachineRoofs {
  double read_bandwidth = 0;  // bytes/s, all threads streaming a buffer far bigger than the caches
  double peak_flops = 0;      // FLOP/s, all threads running independent FMA chains
  int threads = 0;
};

// A read-bandwidth probe that keeps its buffer and its threads, so that its
// passes can be interleaved with the work it bounds: on a shared machine
// both then see the same neighbours (probing once before the work left the
// ratio of the two to whatever the neighbours did in between).
class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe(long long bytes, int threads);
  ~ReadBandwidthProbe();
  ReadBandwidthProbe(const ReadBandwidthProbe&) = delete;
  ReadBandwidthProbe& operator=(const ReadBandwidthProbe&) = delete;
  double pass();  // bytes/s of one pass over the whole buffer

 private:
  struct State;
  State* state_;
};

// bytes: size of the streamed buffer; repeats: best of that many passes.
double measure_read_bandwidth(long long bytes, int threads, int repeats = 5);
double measure_peak_flops(int threads);
MachineRoofs measure_machine(int threads, long long bandwidth_bytes = 512ll << 20);

}  // namespace ts::cpu
