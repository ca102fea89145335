#pragma once
// tokenscope-bench's flags: the options they set, the help text that
// documents them, and their checks (on the command line, then against the
// model's context once it is known).
#include <filesystem>
#include <string>
#include <vector>

#include "model/weight_format.h"
#include "sampling/speculative.h"
#include "session/model_setup.h"

namespace ts::bench {

struct BenchOptions {
  ts::ModelSetupOptions setup;  // --model, --device, --threads (shared with the other front ends)
  std::string write_random;     // write a random checkpoint here, then bench it
  std::string random_shape;     // its flag: --write-random-124m or --write-random-1.5b
  // The sizes' defaults are fitted to the model's context once it is known;
  // a size the user gave is checked against it instead.
  int prefill_tokens = 128;
  int context = 64;  // cached tokens before the decode steps
  bool prefill_given = false, context_given = false, spec_tokens_given = false;
  int decode_steps = 20;
  std::vector<int> lanes = {1, 2, 4, 8};
  std::vector<int> cache_compare;     // generation lengths for KV cache on vs off
  std::filesystem::path draft_model;  // --draft-model: speculative vs plain decoding
  std::vector<int> spec_gammas = {4, ts::kSpecGammaAuto};
  int spec_tokens = 64;
  bool spec_self_draft = false;  // also the model drafting for itself
  std::string spec_random_dir;   // --spec-random-pairs: write and bench the random pairs
  bool spec_only = false;        // skip the prefill / decode / lanes sections
  std::vector<int> batch_sweep;  // --batch-sweep: batch sizes of the batch sweep (empty: off)
  std::vector<ts::WeightFormat> formats;  // --formats: the formats section (empty: off)
  int lookahead_tokens = 0;  // --lookahead N: lookahead and prompt lookup vs greedy (0: off)
  bool avx2_only = false;    // --cpu-vectors avx2: no AVX-512 skinny kernel
  bool help = false;
};

// Layers of the random 355M-shaped target that its first-layers draft keeps.
constexpr int kFirstLayersDraft = 4;

// The flags' text for --help.
std::string help_text();

// The options of a command line; `help` set when it asks for --help (the
// other flags are then not read). Throws ts::Error (one line) on a bad flag.
BenchOptions parse_options(int argc, char** argv);

// Fits the defaults of --context and --prefill-tokens to the model's context
// n_ctx and checks the sizes given against it (before the KV cache is
// allocated); `model_dir` names the model in the message. Throws ts::Error.
void fit_to_context(BenchOptions& o, int n_ctx, const std::string& model_dir);

}  // namespace ts::bench
