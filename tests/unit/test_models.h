#pragma once
// Loading a test model on the CPU (2 threads), as every session-level test does.
#include <filesystem>
#include <string>

#include "session/model_setup.h"
#include "test_paths.h"

namespace ts::test {

// cache_sequences: KV capacity in full contexts (lanes, beams and scratch).
inline LoadedModel load_model(const std::filesystem::path& dir, const std::string& device = "cpu",
                              int cache_sequences = 10) {
  ModelSetupOptions o;
  o.model = dir;
  o.device = device;
  o.cpu_threads = 2;
  o.cache_sequences = cache_sequences;
  return load_model_setup(o);
}

// The bundled model on the CPU (2 threads) with its matmul weights in `weights`.
inline LoadedModel load_bundled(WeightFormat weights) {
  ModelSetupOptions o;
  o.model = bundled_model_dir();
  o.device = "cpu";
  o.cpu_threads = 2;
  o.weights = weights;
  return load_model_setup(o);
}

inline LoadedModel load_tiny(int cache_sequences = 10) {
  return load_model(tiny_model_dir(), "cpu", cache_sequences);
}

// A KV cache shape for `config` with `num_blocks` blocks of `block_size`.
inline KvCacheShape cache_shape(const ModelConfig& config, int num_blocks, int block_size = 16) {
  KvCacheShape shape;
  shape.n_layer = config.n_layer;
  shape.n_head = config.n_head;
  shape.head_dim = config.head_dim();
  shape.block_size = block_size;
  shape.num_blocks = num_blocks;
  return shape;
}

// A sampling strategy at `temperature` with `seed`.
inline SamplingParams sampled(float temperature, uint64_t seed) {
  SamplingParams p;
  p.do_sample = true;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

}  // namespace ts::test
