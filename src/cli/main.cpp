// tokenscope-cli: the terminal front end of the step machine.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/cli_options.h"
#include "cli/compare_printer.h"
#include "cli/step_printer.h"
#include "session/evaluate.h"
#include "session/model_setup.h"
#include "session/session.h"
#include "session/session_export.h"
#include "util/error.h"

namespace {

int run_eval(ts::LoadedModel& model, const ts::cli::CliOptions& o) {
  std::ifstream in(o.eval_loss_file, std::ios::binary);
  if (!in) throw ts::Error(o.eval_loss_file + ": cannot open");
  std::stringstream buf;
  buf << in.rdbuf();
  const std::vector<int> tokens = model.tokenizer->encode_ids(buf.str());
  const int window = o.eval_window > 0 ? o.eval_window : model.engine->config().n_ctx;
  const ts::LossReport r = ts::evaluate_loss(*model.engine, tokens, window);
  std::printf(
      "{\"file\": \"%s\", \"tokens\": %lld, \"predictions\": %lld, \"windows\": %d, "
      "\"window\": %d, \"mean_loss_nats\": %.6f}\n",
      o.eval_loss_file.c_str(), r.tokens, r.predictions, r.windows, window, r.mean_nats);
  return 0;
}

// Enter = next step, b = back, q = quit. Returns false to stop.
bool interactive_command(ts::Session& session, const ts::cli::CliOptions& o) {
  for (;;) {
    std::cout << "-- next: " << session.next_action() << "  [Enter] step  [b] back  [q] quit > "
              << std::flush;
    std::string line;
    if (!std::getline(std::cin, line) || line == "q") return false;
    try {
      if (line == "b") {
        session.back();
        std::cout << "stepped back; now at: " << ts::state_name(session.state()) << "\n";
        ts::cli::print_lanes_text(std::cout, session);
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

}  // namespace

int main(int argc, char** argv) {
  try {
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

    ts::SessionOptions so;
    so.record_attention = o.record_attention;
    so.kv_cache = o.kv_cache;
    so.max_new_tokens = std::max(1, o.steps + 1);
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
    if (o.interactive) {
      interactive_command(session, o);
    } else if (o.strategies.size() > 1 && !o.quiet) {
      // --compare: lanes as columns, then how they compare.
      ts::cli::ComparePrinter printer(session);
      for (int i = 0; i <= o.steps && session.can_step(); ++i) {
        const ts::StepTrace& step = session.step();
        printer.print_row(std::cout, step);
        if (o.logit_lens) ts::cli::print_logit_lens(std::cout, session, step);
      }
      printer.print_summary(std::cout);
      std::cout << "\n";
      ts::cli::print_lanes_text(std::cout, session);
    } else {
      for (int i = 0; i <= o.steps && session.can_step(); ++i) {
        const ts::StepTrace& step = session.step();
        if (!o.quiet) ts::cli::print_step(std::cout, session, step, o.top);
        if (o.logit_lens) ts::cli::print_logit_lens(std::cout, session, step);
      }
      ts::cli::print_lanes_text(std::cout, session);
    }
    if (!o.json_file.empty()) {
      ts::JsonExportOptions jo;
      jo.full_logits = o.json_full_logits;
      jo.attention = o.record_attention;
      ts::write_session_json(session, o.json_file, jo);
      if (!o.quiet) std::cout << "wrote " << o.json_file << "\n";
    }
    return 0;
  } catch (const ts::Error& e) {
    std::cerr << "tokenscope-cli: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tokenscope-cli: internal error: " << e.what() << "\n";
    return 3;
  }
}
