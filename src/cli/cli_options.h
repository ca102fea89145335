#pragma once
// Command line of tokenscope-cli.
#include <filesystem>
#include <string>
#include <vector>

#include "sampling/sampling_params.h"
#include "session/model_flags.h"
#include "session/model_setup.h"
#include "session/precision_compare.h"
#include "session/session.h"

namespace ts::cli {

struct CliOptions {
  ModelSetupOptions setup;
  std::filesystem::path draft_model;  // --draft-model: speculative lanes' draft
  std::string prompt = "Today's weather is so";
  int steps = 16;                          // decode steps after prefill
  std::vector<SamplingParams> strategies;  // one per lane; empty = greedy
  bool interactive = false;
  std::string json_file;
  bool json_full_logits = false;
  bool record_attention = true;
  bool kv_cache = true;
  int top = 5;                 // alternatives printed per step
  std::string eval_loss_file;  // --eval-loss: print loss and exit
  int eval_window = 0;         // 0: the model's context
  bool quiet = false;
  bool logit_lens = false;  // print the logit lens after every step
  BanWordsFlags ban_words;  // --ban-words FILE / --no-ban-words (default: on for the bundled model)
  bool memory = false;      // --memory: print the memory report after load and after the run
  bool help = false;

  // --score: continuations scored after --prompt under the raw model (one
  // prefill, every position's logits), printed per token; two compare.
  std::vector<std::string> score;

  // --quiz (with --interactive): before each step is shown, guess its token.
  bool quiz = false;

  // --compare-precision REF,FMT: the prompt run greedily under two weight
  // formats of the same checkpoint (session/precision_compare.h).
  bool compare_precision = false;
  PrecisionPair precision;
  // --compare-model PATH: the prompt run greedily under the model (--model)
  // and the one at PATH, which shares its vocabulary.
  std::filesystem::path compare_model;
};

// Throws ts::Error with a one-line message for an unknown flag or bad value.
CliOptions parse_cli(int argc, char** argv);
std::string cli_help();

}  // namespace ts::cli
