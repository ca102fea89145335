#pragma once
// Everything a front end does before its first step: find the model, load
// weights and tokenizer, pick a backend and size the KV cache.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/tokenizer.h"
#include "model/weights.h"
#include "sampling/sampling_params.h"

namespace ts {

struct ModelSetupOptions {
  std::filesystem::path model;      // empty: the bundled default
  std::filesystem::path tokenizer;  // empty: the model directory
  std::string device = "auto";      // auto | cpu | cuda
  int cpu_threads = 0;              // 0: every hardware thread
  int cache_sequences = 10;         // KV capacity in full contexts (lanes + scratch)
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

// KV capacity (in full contexts) that lanes with these strategies need: one
// sequence per lane, one per beam of a beam lane, and two for scratch work.
int cache_sequences_for(const std::vector<SamplingParams>& strategies);

// The bundled model: $TOKENSCOPE_MODEL, then assets/models/tokenscope-tiny
// beside the executable's project, then the source tree's copy.
std::filesystem::path default_model_path();

// Throws ts::Error with one line naming the file at fault. After loading it
// runs a short prefill and a decode step through a scratch sequence (then
// released), so the thread pool, the backend's scratch buffers and the
// weights' pages are warm before the first step a front end times.
LoadedModel load_model_setup(const ModelSetupOptions& options);

// The warm-up load_model_setup runs: a few-token prefill and one decode step
// on a temporary KV sequence, recording what a session records. The cache is
// left as it was.
void warm_up(Engine& engine);

}  // namespace ts
