#pragma once
// The formats section (--formats): one decode step of the same checkpoint
// under several weight formats, timed in turn round by round in one process,
// so that each format's step is divided by its own read bound and by the
// first format's step measured beside it, not in another run on a machine
// whose bandwidth drifts between runs.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/options.h"
#include "model/weights.h"

namespace ts::bench {

// One engine per format in o.formats on the checkpoint in `model_dir` (its
// sizes already fitted to the context), each with o.context cached tokens,
// then o.decode_steps rounds. `f32`: that checkpoint already loaded in f32,
// or null to read it here. Throws ts::Error.
nlohmann::json bench_formats(const BenchOptions& o, const std::string& model_dir,
                             std::shared_ptr<const ts::ModelWeights> f32);

}  // namespace ts::bench
