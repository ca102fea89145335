// The long soak: N random commands (default 10,000) through a SessionWorker
// with every invariant of tests/soak/soak_driver.h checked after each, and
// this process's resident memory after 2,000 commands and at the end.
//   ts_soak [--commands N] [--seed S] [--model DIR] [--threads N]
// Prints one JSON object; exits 1 when an invariant broke or memory grew by
// more than 5% between the two readings.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "proc_memory.h"
#include "soak_driver.h"

int main(int argc, char** argv) {
  int commands = 10000;
  uint64_t seed = 1;
  std::string model;
  int threads = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--commands" && has_value) {
      commands = std::atoi(argv[++i]);
    } else if (a == "--seed" && has_value) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--model" && has_value) {
      model = argv[++i];
    } else if (a == "--threads" && has_value) {
      threads = std::atoi(argv[++i]);
    } else {
      std::cerr << "usage: ts_soak [--commands N] [--seed S] [--model DIR] [--threads N]\n";
      return 2;
    }
  }
  if (commands < 2000) {
    std::cerr << "ts_soak: --commands must be at least 2000\n";
    return 2;
  }
  try {
    ts::ModelSetupOptions o;
    o.model = model;
    o.device = "cpu";
    o.cpu_threads = threads;
    const ts::LoadedModel m = ts::load_model_setup(o);
    ts::soak::SoakDriver driver(m, seed);
    const auto start = std::chrono::steady_clock::now();
    driver.run(2000, 1);
    const ts::soak::ResidentMemory at_2000 = ts::soak::resident_memory();
    driver.run(commands - 2000, 1);
    const ts::soak::ResidentMemory at_end = ts::soak::resident_memory();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const ts::soak::SoakStats& st = driver.stats();
    const double growth = double(at_end.rss_kb) / double(at_2000.rss_kb) - 1.0;
    nlohmann::json out = {{"model", m.path.string()},
                          {"seed", seed},
                          {"commands", st.commands},
                          {"refused", st.refused},
                          {"issued", st.issued},
                          {"refusals", st.refusals},
                          {"failures", st.failures},
                          {"seconds", seconds},
                          {"rss_kb_after_2000", at_2000.rss_kb},
                          {"rss_kb_at_end", at_end.rss_kb},
                          {"rss_growth", growth},
                          {"peak_rss_kb", at_end.hwm_kb}};
    std::cout << out.dump(2) << "\n";
    return st.failures.empty() && growth <= 0.05 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "ts_soak: " << e.what() << "\n";
    return 2;
  }
}
