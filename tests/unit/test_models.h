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

inline LoadedModel load_tiny(int cache_sequences = 10) {
  return load_model(tiny_model_dir(), "cpu", cache_sequences);
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
