// What a front end's first steps cost, and where resident memory goes.
// Loads a model as the window and the CLI do (load_model_setup: weights
// made resident, warm-up pass), then times a prefill of the prompt and N
// decode steps through a Session, and reads this process's resident memory
// after loading and at the end.
//   ts_first_step [--model DIR] [--tokenizer DIR] [--threads N]
//                 [--prompt TEXT] [--decode-steps N]
// Prints one JSON object. prefill_to_decode is the first prefill's time over
// the median decode step's: at a short prompt both read the same weights,
// so an honest first step keeps it small (about 1-2).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "proc_memory.h"
#include "session/memory_report.h"
#include "session/model_setup.h"
#include "session/session.h"

namespace {

nlohmann::json memory_json(const ts::soak::ResidentMemory& m) {
  return {{"rss_mb", m.rss_kb / 1024.0},
          {"anon_mb", m.anon_kb / 1024.0},
          {"file_mb", m.file_kb / 1024.0},
          {"peak_rss_mb", m.hwm_kb / 1024.0}};
}

}  // namespace

int main(int argc, char** argv) {
  ts::ModelSetupOptions o;
  o.device = "cpu";
  o.cpu_threads = 2;
  std::string prompt = "The cat sat on the";
  int decode_steps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--model" && has_value) {
      o.model = argv[++i];
    } else if (a == "--tokenizer" && has_value) {
      o.tokenizer = argv[++i];
    } else if (a == "--threads" && has_value) {
      o.cpu_threads = std::atoi(argv[++i]);
    } else if (a == "--prompt" && has_value) {
      prompt = argv[++i];
    } else if (a == "--decode-steps" && has_value) {
      decode_steps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::cerr << "usage: ts_first_step [--model DIR] [--tokenizer DIR] [--threads N] "
                   "[--prompt TEXT] [--decode-steps N]\n";
      return 2;
    }
  }
  try {
    const ts::soak::ResidentMemory before = ts::soak::resident_memory();
    const ts::LoadedModel m = ts::load_model_setup(o);
    const ts::soak::ResidentMemory loaded = ts::soak::resident_memory();
    ts::SessionOptions so;
    so.max_new_tokens = decode_steps + 1;
    ts::Session s(m.tokenizer, m.engine, so);
    const nlohmann::json report_loaded = ts::memory_report_json(ts::memory_report(s));
    s.set_prompt(prompt);
    const double prefill = s.prefill().seconds;
    std::vector<double> decode;
    for (int i = 0; i < decode_steps && s.can_step(); ++i) decode.push_back(s.step().seconds);
    const ts::soak::ResidentMemory end = ts::soak::resident_memory();
    std::vector<double> sorted = decode;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];

    const ts::ModelConfig& cfg = m.engine->config();
    const ts::KvOccupancy kv = m.engine->cache().occupancy();
    nlohmann::json out = {
        {"model", m.path.string()},
        {"backend", m.engine->backend().device_name()},
        {"load_seconds", m.load_seconds},
        {"warmup_seconds", m.warmup_seconds},
        {"prompt_tokens", s.prompt_tokens().size()},
        {"prefill_ms", prefill * 1e3},
        {"decode_ms_first", decode.empty() ? 0 : decode.front() * 1e3},
        {"decode_ms_median", median * 1e3},
        {"prefill_to_decode", median > 0 ? prefill / median : 0},
        {"memory",
         {{"weights_fp32_mb", double(cfg.parameter_count()) * 4 / 1048576.0},
          {"weights_stored_as", m.engine->weights().storage_dtype},
          {"kv_pool_capacity_mb", double(kv.bytes_per_layer_capacity) * cfg.n_layer / 1048576.0},
          {"kv_pool_used_mb", double(kv.bytes_per_layer_used) * cfg.n_layer / 1048576.0},
          {"trace_mb", s.trace_bytes() / 1048576.0},
          {"trace_budget_mb", so.trace_budget_bytes / 1048576.0},
          {"before_load", memory_json(before)},
          {"after_load", memory_json(loaded)},
          {"after_steps", memory_json(end)},
          // Part by part (session/memory_report.h), after loading and at the end.
          {"report_after_load", report_loaded},
          {"report_after_steps", ts::memory_report_json(ts::memory_report(s))}}}};
    std::cout << out.dump(2) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ts_first_step: " << e.what() << "\n";
    return 2;
  }
}
