#pragma once
// JSON form of the per-step records (what `--json` and the GUI's export write).
#include <nlohmann/json.hpp>

#include "engine/kv_cache.h"
#include "trace/step_trace.h"

namespace ts {

struct JsonExportOptions {
  int top_n = 20;            // logits listed per lane and step
  bool full_logits = false;  // every logit, every step (large)
  bool attention = true;     // attention rows recorded in the trace
};

nlohmann::json kv_occupancy_to_json(const KvOccupancy& kv);
nlohmann::json step_to_json(const StepTrace& step, const JsonExportOptions& options);

}  // namespace ts
