#pragma once
// The seam between the engine and the hardware. One forward function serves
// both phases: prefill is one entry with n new tokens; decode is k entries
// with one new token each. The KV cache bookkeeping (which slot each token
// goes to) is decided by the engine before a backend runs; a backend owns
// only the K/V pools and the arithmetic.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/kv_cache.h"

namespace ts {

struct BatchEntry {
  SeqId seq = -1;
  std::vector<int> tokens;       // the new tokens of this sequence
  int start_pos = 0;             // position of tokens[0] (= cached tokens before)
  std::vector<int> slots;        // physical KV slot for each new token
  std::vector<int> block_table;  // covers start_pos + tokens.size() tokens
  // A pass that feeds several branches at once (lookahead decoding's window
  // and candidates). The new tokens' keys sit at context indices start_pos +
  // i whatever their positions; each new token attends to the whole cached
  // context plus the new tokens its mask row names. Empty = the causal pass.
  //   positions[i]: the position token i is embedded at (wpe); may repeat.
  //   mask[i * n + j] (n = tokens.size()): 1 if token i attends to new token
  //   j. Lower triangular with a full diagonal (j <= i, mask[i * n + i] = 1):
  //   a token attends to itself and to tokens fed before it.
  std::vector<int> positions;
  std::vector<uint8_t> mask;
  bool masked() const { return !mask.empty(); }
  int position(int i) const { return positions.empty() ? start_pos + i : positions[i]; }
  int context() const { return start_pos + static_cast<int>(tokens.size()); }
};

// One KV row moved inside the pools, every layer, K and V: what keeps a
// lookahead pass's accepted rows and lets the rest be truncated.
struct SlotMove {
  int src_slot = 0;
  int dst_slot = 0;
};

// Throws ts::Error naming the first problem of an entry's positions or mask
// (sizes, a position outside [0, n_ctx), a mask that is not lower triangular
// with a full diagonal). Empty ones are the causal pass and always pass.
void check_pass_layout(const BatchEntry& entry, int n_ctx);

struct ForwardOptions {
  bool record_attention = false;
  std::vector<bool> attention_layers;  // empty = every layer (when recording)
  bool all_logits = false;             // logits for every new token, else the last
  bool record_residuals = false;       // residual stream of the last token (logit lens)
  // The last layer's output after ln_f for every new token (contrastive
  // search compares them); off by default so other steps copy nothing.
  bool record_hidden = false;
  // Llama family: this layer's q and k after RoPE for every new token (the
  // RoPE view); -1 = none. The CPU backend records them; others leave qk empty.
  int record_qk_layer = -1;
  bool wants_attention(int layer) const {
    return record_attention &&
           (attention_layers.empty() ||
            (layer < static_cast<int>(attention_layers.size()) && attention_layers[layer]));
  }
};

struct EntryOutput {
  int logit_rows = 0;         // 1, or tokens.size() with all_logits
  std::vector<float> logits;  // [logit_rows][vocab]
  // attention[layer] = [head][row][context] (row r sees keys 0..start_pos+r;
  // the masked part is 0). Empty for layers not recorded.
  std::vector<std::vector<float>> attention;
  // [n_layer + 1][C]: embedding, then after each block (before ln_f).
  std::vector<float> residuals;
  // [rows][C]: ln_f(x) of every new token, with record_hidden (else empty).
  std::vector<float> hidden;
  // [rows][q_dim + kv_dim]: q then k of layer record_qk_layer after RoPE
  // (empty unless recorded).
  std::vector<float> qk;
};

// The two roofs of the roofline for the hardware a backend computes on: peak
// FLOP/s of the matmuls it runs (fp32, or TF32 when those are on) and memory
// bandwidth, measured by a short probe (about a second) on that very
// hardware. `how` labels the figures for the user.
struct HardwareRoofs {
  double peak_flops = 0;  // FLOP/s
  double bandwidth = 0;   // bytes/s
  std::string how;        // e.g. "measured at start-up: 2 CPU threads, FMA chains + streaming read"
  int threads = 0;        // CPU threads the probe ran on (0 on a GPU)
  // A small model's weights may fit in the CPU's caches, which stream faster
  // than main memory: the bandwidth of a buffer of the weights' size, when
  // that is well below the main-memory probe's (0 otherwise).
  double working_set_bytes = 0;
  double working_set_bandwidth = 0;
  bool valid() const { return peak_flops > 0 && bandwidth > 0; }
  // The bandwidth that bounds a step reading working_set_bytes of weights.
  double effective_bandwidth() const { return std::max(bandwidth, working_set_bandwidth); }
};

// What a backend holds in the memory it computes in, for the memory report
// and for sizing the KV cache. Every figure is read from the allocations.
struct BackendMemory {
  std::string where;    // "host RAM", or the GPU's name
  bool on_host = true;  // the pools and scratch are in this process's RAM
  struct Range {
    const void* begin = nullptr;
    size_t bytes = 0;
  };
  std::vector<Range> kv_pools;    // host ranges of the K and V pools (on_host only)
  int64_t kv_reserved_bytes = 0;  // the pools' size
  // The weights' copy in device memory (0 on the host, which reads the
  // loaded tensors themselves).
  int64_t weight_copy_bytes = 0;
  // Activations and result buffers of a forward: the last forward's and the
  // largest so far (on a GPU they are kept between steps: both are what is
  // allocated now).
  int64_t scratch_last_bytes = -1;
  int64_t scratch_peak_bytes = -1;
  int64_t pinned_host_bytes = 0;  // page-locked host staging (GPU backends)
  // The memory the backend computes in: physical RAM, or the GPU's memory,
  // and how much of it is free now.
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;         // "cpu", "cuda"
  virtual std::string device_name() const = 0;  // e.g. "AMD EPYC (2 threads)"
  // Whether init_cache takes a KvCacheShape in this format (--kv). A backend
  // that does not say keeps its cache in fp32 only.
  virtual bool stores_kv_format(WeightFormat format) const { return format == WeightFormat::kF32; }
  virtual BackendMemory memory() const = 0;
  // The bytes a new KV cache may take where this backend keeps it, and the
  // name of that memory for a message ("this machine's 23.4 GiB of memory").
  virtual int64_t kv_budget_bytes() const = 0;
  virtual std::string kv_budget_name() const = 0;
  // The roofs of the hardware this backend computes on (cpu_threads: the
  // CPU probe's threads, 0 = all; working_set_bytes: the model's weights, 0 =
  // skip the cache-sized probe). Throws ts::Error when the probe cannot run.
  virtual HardwareRoofs measure_roofs(int cpu_threads, double working_set_bytes) const = 0;
  // The bandwidth half alone, re-probed right before a measurement it bounds.
  virtual double measure_bandwidth(int cpu_threads) const = 0;
  // Allocates the K/V pools for this shape (drops previous contents). A
  // shape that cannot be allocated throws and leaves the old pools, shape
  // and contents as they were.
  virtual void init_cache(const KvCacheShape& shape) = 0;
  virtual void copy_blocks(const std::vector<BlockCopy>& copies) = 0;
  // Copies each move's source row to its destination, in order (a move may
  // read a row an earlier move wrote). Slots must lie inside the pools.
  virtual void move_slots(const std::vector<SlotMove>& moves) = 0;
  virtual void forward(const std::vector<BatchEntry>& batch, const ForwardOptions& options,
                       std::vector<EntryOutput>& outputs) = 0;
};

}  // namespace ts
