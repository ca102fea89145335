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
};

// KV capacity (in full contexts) that lanes with these strategies need: one
// sequence per lane, one per beam of a beam lane, and two for scratch work.
int cache_sequences_for(const std::vector<SamplingParams>& strategies);

// The bundled model: $TOKENSCOPE_MODEL, then models/tokenscope-tiny in the
// data folders beside the executable (util/paths.h: an install's
// share/tokenscope, or the build tree's link to assets/).
std::filesystem::path default_model_path();

// Throws ts::Error with one line naming the file at fault.
LoadedModel load_model_setup(const ModelSetupOptions& options);

}  // namespace ts
