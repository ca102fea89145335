// tokenscope-bench: prefill and decode speed of a model on a backend, each
// figure printed beside the physical bound measured in the same run.
// The flags: bench/options.h; the measurements: bench/runs.h and
// bench/speculative_bench.h.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/options.h"
#include "bench/runs.h"
#include "bench/speculative_bench.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_blocks.h"
#include "util/error.h"

namespace {

using nlohmann::json;

// Exit code when a speculative or lookahead greedy output differs from plain greedy's.
constexpr int kExitMismatch = 1;

// After the JSON: one line saying why the exit code is not 0.
int mismatch_exit() {
  std::cerr << "tokenscope-bench: a speculative or lookahead greedy output differs from plain "
               "greedy's (see \"outputs identical: no\" / \"OUTPUT DIFFERS\" above)\n";
  return kExitMismatch;
}

int run(int argc, char** argv) {
  const ts::bench::BenchOptions o = ts::bench::parse_options(argc, argv);
  if (o.help) {
    std::cout << ts::bench::help_text();
    return 0;
  }
  ts::cpu::allow_avx512(!o.avx2_only);
  ts::cpu::allow_avxvnni(!o.avx2_only);
  // The random pairs are written by the speculative section itself; any
  // other run resolves its model (writing the random checkpoint) here, once.
  const std::string model_dir = o.spec_random_dir.empty() ? ts::bench::bench_model_dir(o) : "";
  bool identical = true;
  json report;
  if (!o.spec_random_dir.empty() || o.spec_only)  // its pairs load their own models
    report = {{"speculative", ts::bench::bench_speculative(o, model_dir, identical)}};
  else
    report = ts::bench::bench_model(o, model_dir, identical);
  std::cout << report.dump(2) << std::endl;
  return identical ? 0 : mismatch_exit();
}

}  // namespace

// Exit codes: 0 done, 1 a speculative or lookahead greedy output differed from plain
// greedy's, 2 bad input (one line naming what is wrong), 3 internal error.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const ts::Error& e) {
    std::cerr << "tokenscope-bench: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "tokenscope-bench: out of memory\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "tokenscope-bench: internal error: " << e.what() << "\n";
    return 3;
  } catch (...) {
    std::cerr << "tokenscope-bench: internal error (unknown exception)\n";
    return 3;
  }
}
