// tokenscope-cli: the terminal front end of the step machine.
#include <signal.h>
#include <algorithm>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>

#include "cli/cli_options.h"
#include "cli/compare_printer.h"
#include "cli/step_printer.h"
#include "session/evaluate.h"
#include "session/memory_report.h"
#include "session/model_setup.h"
#include "session/session.h"
#include "session/session_export.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;

// The most --eval-loss reads: a bound, so that /dev/zero or a huge file is
// refused instead of filling memory (64 MiB is ~16M GPT-2 tokens).
constexpr std::streamsize kMaxEvalBytes = 64ll << 20;

// Ctrl-C stops the generation between steps (so the --json file can say where).
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) { g_interrupted = 1; }

std::string read_eval_text(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec) throw ts::Error(path + ": " + ec.message());
  if (fs::is_directory(st)) throw ts::Error(path + ": is a directory, not a text file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ts::Error(path + ": cannot open");
  std::string text(static_cast<size_t>(kMaxEvalBytes) + 1, '\0');
  in.read(text.data(), kMaxEvalBytes + 1);
  if (in.bad()) throw ts::Error(path + ": read failed");
  if (in.gcount() > kMaxEvalBytes)
    throw ts::Error(path + ": larger than the 64 MiB --eval-loss reads");
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

int run_eval(ts::LoadedModel& model, const ts::cli::CliOptions& o) {
  const std::vector<int> tokens = model.tokenizer->encode_ids(read_eval_text(o.eval_loss_file));
  const int n_ctx = model.engine->config().n_ctx;
  if (o.eval_window > n_ctx)
    throw ts::Error("--eval-window: " + std::to_string(o.eval_window) +
                    " is out of range, at most the model's context of " + std::to_string(n_ctx));
  const int window = o.eval_window > 0 ? o.eval_window : n_ctx;
  const ts::LossReport r = ts::evaluate_loss(*model.engine, tokens, window);
  const nlohmann::ordered_json line = {
      {"file", o.eval_loss_file}, {"tokens", r.tokens}, {"predictions", r.predictions},
      {"windows", r.windows},     {"window", window},   {"mean_loss_nats", r.mean_nats}};
  std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}

// Enter = next step, b = back, q = quit. Returns false to stop.
bool interactive_command(ts::Session& session, const ts::cli::CliOptions& o) {
  for (;;) {
    if (g_interrupted) return false;
    std::cout << "-- next: " << session.next_action() << "  [Enter] step  [b] back  [q] quit > "
              << std::flush;
    std::string line;
    if (!std::getline(std::cin, line)) {
      std::cout << "\n";  // end of input: leave the prompt line
      return false;
    }
    if (line == "q") return false;
    try {
      if (line == "b") {
        session.back();
        std::cout << "stepped back; now at: " << ts::state_name(session.state()) << "\n";
        ts::cli::print_lanes_text(std::cout, session);
        continue;
      }
      if (!line.empty()) {
        std::cout << "unknown command '" << ts::cli::printable(line)
                  << "': Enter = step, b = back, q = quit\n";
        continue;
      }
      if (!session.can_step()) {
        std::cout << "cannot step: " << session.next_action() << "\n";
        continue;
      }
      const ts::StepTrace& step = session.step();
      ts::cli::print_step(std::cout, session, step, o.top);
      if (o.logit_lens) ts::cli::print_logit_lens(std::cout, session, step);
      ts::cli::print_lanes_text(std::cout, session);
    } catch (const ts::Error& e) {
      std::cout << "error: " << e.what() << "\n";
    }
  }
}

// "12.3": seconds as milliseconds with one decimal.
std::string milliseconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", seconds * 1e3);
  return buf;
}

// --memory: the memory report, one indented line per part.
void print_memory(std::ostream& out, const char* when, const ts::MemoryReport& r) {
  out << "memory " << when << ":\n";
  for (const std::string& line : ts::memory_report_lines(r)) out << "  " << line << "\n";
}

int run(int argc, char** argv) {
  const ts::cli::CliOptions o = ts::cli::parse_cli(argc, argv);
  if (o.help) {
    std::cout << ts::cli::cli_help();
    return 0;
  }
  ts::ModelSetupOptions setup = o.setup;
  setup.cache_sequences = std::max(setup.cache_sequences, ts::cache_sequences_for(o.strategies));
  ts::LoadedModel model = ts::load_model_setup(setup);
  if (!model.backend_notice.empty()) std::cerr << "note: " << model.backend_notice << "\n";
  if (!o.eval_loss_file.empty()) return run_eval(model, o);

  // More steps than the context holds end at the context: no overflow below.
  const int n_ctx = model.engine->config().n_ctx;
  const int steps = std::min(o.steps, n_ctx);
  ts::SessionOptions so;
  so.record_attention = o.record_attention;
  so.kv_cache = o.kv_cache;
  so.max_new_tokens = steps + 1;
  ts::Session session(model.tokenizer, model.engine, so);
  session.set_strategies(o.strategies);
  session.set_prompt(o.prompt);
  if (!o.quiet)
    std::cout << "model " << model.name << " (" << model.engine->config().parameter_count()
              << " parameters) on " << model.engine->backend().name() << ": "
              << model.engine->backend().device_name() << "\n"
              << "loaded in " << milliseconds(model.load_seconds) << " ms, warm-up pass "
              << milliseconds(model.warmup_seconds)
              << " ms (neither is counted in any step's time)\n";
  if (o.memory) print_memory(std::cout, "after load", ts::memory_report(session));
  // No SA_RESTART: a Ctrl-C also ends --interactive's wait for a line.
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  if (o.interactive) {
    interactive_command(session, o);
  } else if (o.strategies.size() > 1 && !o.quiet) {
    // --compare: lanes as columns, then how they compare.
    ts::cli::ComparePrinter printer(session);
    for (int i = 0; i <= steps && session.can_step() && !g_interrupted; ++i) {
      const ts::StepTrace& step = session.step();
      printer.print_row(std::cout, step);
      if (o.logit_lens) ts::cli::print_logit_lens(std::cout, session, step);
    }
    printer.print_summary(std::cout);
    std::cout << "\n";
    ts::cli::print_lanes_text(std::cout, session);
  } else {
    for (int i = 0; i <= steps && session.can_step() && !g_interrupted; ++i) {
      const ts::StepTrace& step = session.step();
      if (!o.quiet) ts::cli::print_step(std::cout, session, step, o.top);
      if (o.logit_lens) ts::cli::print_logit_lens(std::cout, session, step);
    }
    ts::cli::print_lanes_text(std::cout, session);
  }
  if (o.memory) print_memory(std::cout, "after the run", ts::memory_report(session));
  const bool interrupted = g_interrupted != 0;
  if (!o.json_file.empty()) {
    ts::JsonExportOptions jo;
    jo.full_logits = o.json_full_logits;
    jo.attention = o.record_attention;
    ts::SessionFileOptions fo;
    fo.interrupted = interrupted;
    // A Ctrl-C that arrives while writing (not the one that ended generation).
    fo.cancel = [interrupted] { return !interrupted && g_interrupted != 0; };
    try {
      ts::write_session_json(session, o.json_file, jo, fo);
    } catch (const ts::ExportCancelled&) {
      // Stopped while writing: nothing new was written. A previous run's file
      // would pass for this run's, so it goes too.
      std::error_code ignored;
      fs::remove(o.json_file, ignored);
      std::cerr << "tokenscope-cli: interrupted while writing " << o.json_file
                << "; nothing written\n";
      return 130;
    }
    if (!o.quiet)
      std::cout << "wrote " << o.json_file << (interrupted ? " (marked interrupted)" : "") << "\n";
  }
  if (interrupted) {
    std::cerr << "tokenscope-cli: interrupted\n";
    return 130;
  }
  return 0;
}

}  // namespace

// Exit codes: 0 done, 2 bad input (one line naming what is wrong), 3 internal
// error, 130 interrupted by Ctrl-C.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const ts::Error& e) {
    std::cerr << "tokenscope-cli: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "tokenscope-cli: out of memory\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "tokenscope-cli: internal error: " << e.what() << "\n";
    return 3;
  } catch (...) {
    std::cerr << "tokenscope-cli: internal error (unknown exception)\n";
    return 3;
  }
}
