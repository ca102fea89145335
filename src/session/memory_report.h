#pragma once
// Where this process's memory goes: the weights, the KV pool, the trace
// store, the forward's scratch, and the process's resident total. Every
// figure is read from the objects that hold the memory or measured from the
// kernel (mincore for the pages of a range, /proc/self/status for the
// process); none is an estimate. Shown by the window's status bar,
// `tokenscope-cli --memory` and tokenscope-bench's JSON.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ts {

class Engine;
class Session;

struct MemoryReport {
  // Weights: the tensors the backend reads (fp32, the matmul weights in
  // weight_format: 2 bytes a value for bf16 / f16; 34 bytes per 32 values
  // for q8 and 18 for q4, their f16 block scales included).
  int64_t weight_bytes = 0;            // every tensor's size, summed
  int64_t weight_mapped_bytes = 0;     // of those, read in place from the file's memory map
  int64_t weight_converted_bytes = 0;  // of those, copied or converted into memory at load
  int64_t weight_resident_bytes = 0;   // pages of the tensors in memory now (mincore)
  std::string weight_dtype;            // as stored on disk
  std::string weight_format = "f32";   // the matmul weights' format in memory (--weights)

  // KV pool. On a GPU it is device memory: kv_on_host is false and the
  // resident figure is 0 (it is not in this process's RSS).
  bool kv_on_host = true;
  std::string kv_format = "f32";  // how the pools store K and V (--kv): f32, f16, bf16 or q8
  int64_t kv_reserved_bytes = 0;  // address space of the pools (every lane's full context)
  int64_t kv_used_bytes = 0;      // blocks the sequences hold now (all layers, K and V)
  int64_t kv_resident_bytes = 0;  // pages written so far (mincore); freed blocks stay resident
                                  // and are reused first
  // One token's K and V over every layer, in kv_format: 2 x n_layer x the KV
  // heads x head_dim values (grouped-query attention caches its KV heads only).
  int64_t kv_bytes_per_token = 0;

  // Trace store: attention and logits the session's history keeps (-1: no session).
  int64_t trace_bytes = -1;
  int64_t trace_budget_bytes = -1;

  // Scratch: the activations and logits rows of a forward, allocated for
  // the step and freed after it (-1: the backend does not say). On a GPU
  // they are device buffers kept between steps: both are what is held now.
  int64_t scratch_last_bytes = -1;
  int64_t scratch_peak_bytes = -1;

  // The GPU's memory, when the backend computes on one (device_memory false
  // on the CPU): the weights' device copy, the KV pool and the scratch are
  // in it; the pinned staging buffer is page-locked host memory.
  bool device_memory = false;
  std::string device_name;
  int64_t device_weight_bytes = 0;
  int64_t device_total_bytes = 0;
  int64_t device_free_bytes = 0;
  int64_t pinned_host_bytes = 0;

  // The draft model of speculative lanes, when the session has one: its
  // weights and its own KV pool, counted like the target's.
  bool has_draft = false;
  int64_t draft_weight_bytes = 0;
  int64_t draft_weight_resident_bytes = 0;
  int64_t draft_kv_reserved_bytes = 0;
  int64_t draft_kv_used_bytes = 0;
  int64_t draft_kv_resident_bytes = 0;

  // The process, from /proc/self/status: VmRSS, RssAnon, RssFile, VmHWM.
  int64_t rss_bytes = 0;
  int64_t rss_anon_bytes = 0;
  int64_t rss_file_bytes = 0;
  int64_t rss_peak_bytes = 0;

  // Resident bytes the parts above account for: weights, KV pool, trace
  // (and the draft's weights and KV pool).
  int64_t accounted_bytes() const;
  // RSS the parts do not name: code and libraries, the tokenizer, the
  // allocator's free lists (freed scratch among them), thread stacks.
  int64_t other_bytes() const { return rss_bytes - accounted_bytes(); }
  // RSS over what the model and the session need: weight bytes + the KV
  // pool's resident pages + the trace store (+ the draft's weights and KV
  // pool). 1.0 would be no overhead at all.
  double rss_ratio() const;
};

// The figures of an engine alone (no session: no trace store).
MemoryReport memory_report(const Engine& engine);
// The engine's figures plus the session's trace store and budget, and its
// draft model's weights and KV pool.
MemoryReport memory_report(const Session& session);

// One line per part, with units, for `tokenscope-cli --memory`.
std::vector<std::string> memory_report_lines(const MemoryReport& r);
// Short form for a status bar: "RSS 512 MiB: weights 475, KV 2, trace 1 MiB".
std::string memory_report_short(const MemoryReport& r);
// Every figure, in bytes, for JSON output.
nlohmann::json memory_report_json(const MemoryReport& r);

// Bytes of [begin, begin + bytes) in memory now, counted in whole pages
// (mincore). Exposed for the tests.
int64_t resident_bytes_of(const void* begin, size_t bytes);

}  // namespace ts
