#pragma once
// The bench's measured runs: the model it benchmarks, then its sections
// (prefill, decode, lanes, KV cache on vs off, speculative) in one report.
#include <nlohmann/json.hpp>
#include <string>

#include "bench/options.h"

namespace ts::bench {

// The model benchmarked: --model, the random checkpoint written first for
// --write-random-* (the one place it is written), or else the bundled model,
// as the other front ends. Throws ts::Error.
std::string bench_model_dir(const BenchOptions& o);

// Loads the model in `model_dir` (the sizes fitted to its context) and runs
// every section the options ask for: the report printed as JSON. `identical`
// turns false when a speculative output differs from plain greedy's.
nlohmann::json bench_model(BenchOptions o, const std::string& model_dir, bool& identical);

}  // namespace ts::bench
