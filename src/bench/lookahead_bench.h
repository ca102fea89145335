#pragma once
// Lookahead decoding and prompt lookup against plain greedy on one engine:
// time per generated token (runs alternated, medians), tokens per pass, and
// the speed-up the step cost model predicts for the passes that were run,
// on ordinary and on repetitive text (a list, a poem with a refrain, code).
#include <nlohmann/json.hpp>
#include <string>

#include "engine/cpu/machine_probe.h"
#include "engine/engine.h"

namespace ts::bench {

// `model_dir`'s tokenizer encodes the texts; a model without one (a random
// checkpoint) gets the bundled model's token ids, valid in any GPT-2-sized
// vocabulary. `identical` turns false when an output differs from greedy's.
nlohmann::json bench_lookahead(Engine& engine, const std::string& model_dir,
                               const cpu::MachineRoofs& roofs, int tokens, bool& identical);

}  // namespace ts::bench
