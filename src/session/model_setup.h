#pragma once
// Everything a front end does before its first step: find the model, load
// weights and tokenizer, pick a backend and size the KV cache.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/engine.h"
#include "model/tokenizer.h"
#include "model/weights.h"
#include "sampling/sampling_params.h"
#include "session/vocab_roles.h"

namespace ts {

struct ModelSetupOptions {
  std::filesystem::path model;      // empty: the bundled default
  std::filesystem::path tokenizer;  // empty: the model directory
  std::string device = "auto";      // auto | cpu | cuda
  // The matmul weights' format (--weights), converted at load.
  WeightFormat weights = WeightFormat::kF32;
  // How the KV cache stores K and V (--kv): f32, or f16 / bf16 / q8 (CPU only).
  WeightFormat kv = WeightFormat::kF32;
  int cpu_threads = 0;       // 0: every hardware thread
  int cache_sequences = 10;  // KV capacity in full contexts (lanes + scratch)
};

struct LoadedModel {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<Engine> engine;
  std::filesystem::path path;  // what was loaded
  std::string name;            // directory or file name, for titles
  std::string backend_notice;  // e.g. "no usable CUDA device (...); running on the CPU"
  // Wall time of loading (tokenizer, weights read into memory, backend set
  // up) and of the untimed warm-up pass that follows it, in seconds. Shown
  // on their own so that no step's time includes them.
  double load_seconds = 0;
  double warmup_seconds = 0;
};

// A KV cache sized in blocks for its sequences' worst case: every sequence
// may own ceil(n_ctx / block_size) blocks of its own (a context that is not a
// multiple of the block size, or small, then still fits).
struct KvCacheSize {
  int sequences = 0;
  int blocks = 0;
  int tokens = 0;     // blocks * block_size: what Engine's cache_tokens takes
  int64_t bytes = 0;  // keys + values over every layer, in the cache's format
};

// Throws ts::Error up front, naming the figures, when the count overflows or
// the cache would need more than the memory it goes in: the backend's
// (Backend::kv_budget_bytes: the GPU's free memory for CUDA, physical RAM for
// the CPU), or this machine's physical memory when no backend is given.
// kv_format: the cache's values (--kv): 4 or 2 bytes each, or 34 per 32 (q8).
KvCacheSize kv_cache_size_for(const ModelConfig& config, int sequences, int block_size = 16,
                              const Backend* backend = nullptr,
                              WeightFormat kv_format = WeightFormat::kF32);

// KV capacity (in full contexts) that lanes with these strategies need: one
// sequence per lane, one per beam of a beam lane, and two for scratch work.
int cache_sequences_for(const std::vector<SamplingParams>& strategies);

// The bundled model: $TOKENSCOPE_MODEL, then models/tokenscope-tiny in the
// data folders beside the executable (util/paths.h: an install's
// share/tokenscope, or the build tree's link to assets/).
std::filesystem::path default_model_path();

// Throws ts::Error with one line naming the file at fault. After loading it
// runs a short prefill and a decode step through a scratch sequence (then
// released), so the thread pool, the backend's scratch buffers and the
// weights' pages are warm before the first step a front end times.
LoadedModel load_model_setup(const ModelSetupOptions& options);

// The draft model of speculative lanes: `path` loaded like the target of
// `target` (device, weight and KV formats, threads), its KV cache sized for `sequences` full
// contexts. Throws ts::Error with one line, "draft model: " and the file at
// fault (a broken draft is never mistaken for the target). With the target's
// tokenizer given, an llm.c draft without tokenizer files beside it uses the
// target's (its vocabulary size checked against it), and a draft whose own
// tokenizer differs from the target's (size, or any id's token bytes) is
// refused in one line naming the first id that differs.
// `roles` words the refusals for another use of a second model (the model
// comparison's "compared model").
LoadedModel load_draft_model(const ModelSetupOptions& target, const std::filesystem::path& path,
                             int sequences,
                             std::shared_ptr<const Tokenizer> target_tokenizer = nullptr,
                             const VocabRoles& roles = {});

// The warm-up load_model_setup runs: a few-token prefill and one decode step
// on a temporary KV sequence, recording what a session records. The cache is
// left as it was.
void warm_up(Engine& engine);

}  // namespace ts
