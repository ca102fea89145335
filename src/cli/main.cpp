// tokenscope-cli: the terminal front end of the step machine.
#include <poll.h>
#include <signal.h>
#include <unistd.h>
#include <algorithm>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <system_error>

#include "cli/cli_options.h"
#include "cli/compare_printer.h"
#include "cli/precision_printer.h"
#include "cli/score_printer.h"
#include "cli/step_printer.h"
#include "session/evaluate.h"
#include "session/memory_report.h"
#include "session/model_setup.h"
#include "session/precision_compare.h"
#include "session/quiz.h"
#include "session/score.h"
#include "session/session.h"
#include "session/session_export.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;

// The most --eval-loss reads: a bound, so that /dev/zero or a huge file is
// refused instead of filling memory (64 MiB is ~16M GPT-2 tokens).
constexpr std::streamsize kMaxEvalBytes = 64ll << 20;

// Ctrl-C (SIGINT), SIGTERM and SIGHUP stop the generation between steps (so
// the --json file can say where): the signal's number, 0 while none came.
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_stop_signal(int sig) { g_interrupted = sig; }

const char* signal_name(int sig) {
  return sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "SIGINT";
}

// A reader that closed standard output (`| head -1`) ends the run quietly:
// SIGPIPE is ignored, and the failed write is noticed here, after a flush.
// Why it failed: EPIPE for a pipe or socket whose reader is gone, else the
// errno of the failure (EIO when unknown); 0 while nothing failed.
int g_output_error = 0;
bool output_closed() {
  if (g_output_error != 0) return true;
  errno = 0;
  if (std::cout.flush()) return false;
  const int err = errno;
  // The write that failed may have been an earlier one, its errno gone; a
  // pipe without a reader polls as an error.
  pollfd p{STDOUT_FILENO, POLLOUT, 0};
  const bool reader_gone = ::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)) != 0;
  g_output_error = reader_gone || err == EPIPE ? EPIPE : err != 0 ? err : EIO;
  return true;
}
bool stopped() { return g_interrupted != 0 || output_closed(); }

// A step that fails (logits that are NaN although every weight is finite,
// e.g. from values that overflow) ends the run the way a signal does: the
// steps before it are kept and --json FILE is still written, marked
// "interrupted"; one line names the step and the cause; exit code 2.
std::string g_step_error;

// What the next step is called in that line: "the prefill", "decode step 3".
std::string next_step_name(const ts::Session& session) {
  const size_t done = session.history().size();
  return done == 0 ? "the prefill" : "decode step " + std::to_string(done);
}

// session.step(), or nullptr when it failed (the reason in g_step_error).
template <typename StepFn>
const ts::StepTrace* checked_step(ts::Session& session, StepFn&& take_step) {
  const std::string name = next_step_name(session);
  try {
    return &take_step();
  } catch (const ts::Error& e) {
    g_step_error = "stopped at " + name + ": " + e.what();
    return nullptr;
  }
}

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
  const std::vector<int> tokens =
      model.tokenizer->model_input_ids(read_eval_text(o.eval_loss_file));
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

// --score: each continuation scored after the prompt, printed (and written
// as JSON with --json FILE); two are compared. Generates nothing.
int run_score(ts::LoadedModel& model, const ts::cli::CliOptions& o) {
  std::vector<ts::ScoreResult> scores;
  for (const std::string& text : o.score)
    scores.push_back(ts::score_text(*model.engine, *model.tokenizer, o.prompt, text, o.top));
  const bool two = scores.size() == 2;
  for (size_t i = 0; i < scores.size(); ++i) {
    ts::cli::print_score(std::cout, scores[i], two ? static_cast<int>(i) + 1 : 0);
    std::cout << "\n";
  }
  if (two) ts::cli::print_score_difference(std::cout, scores[0], scores[1]);
  if (!o.json_file.empty()) {
    const nlohmann::json doc =
        two ? ts::score_comparison_to_json(scores[0], scores[1]) : ts::score_to_json(scores[0]);
    // Written whole to a temporary file, then renamed: FILE is never
    // half-written, and a symbolic link is written through, not replaced;
    // /dev/stdout and the like are appended to, after what was printed.
    std::cout.flush();
    ts::write_file_atomically(
        o.json_file, doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
        true);
    std::cout << "wrote " << o.json_file << "\n";
  }
  return 0;
}

// --quiz: each step's guess (none when skipped), by history index: the
// running score is theirs, so stepping back takes a step's guess out of it
// and a step taken again is scored once, with the guess made then.
using QuizRecord = std::vector<std::optional<ts::QuizGuess>>;

ts::QuizTally quiz_tally(const QuizRecord& record) {
  ts::QuizTally tally;
  for (const auto& g : record)
    if (g) tally.add(*g);
  return tally;
}

void print_quiz_score(const QuizRecord& record) {
  const ts::QuizTally tally = quiz_tally(record);
  char buf[240];
  std::snprintf(buf, sizeof buf,
                "  quiz score: %d %s, mean log-probability %.4f nats; %d %s the chosen token "
                "(%d when the model's top-1 was not chosen)\n",
                tally.guesses, tally.guesses == 1 ? "guess" : "guesses", tally.mean_log_prob(),
                tally.correct, tally.correct == 1 ? "was" : "were", tally.beat_top1);
  std::cout << buf;
}

// --quiz: runs the step without showing it, asks for a guess at lane 0's
// token (a number from the shortlist or a typed word; Enter skips), then
// reveals the model's choice and scores the guess. The caller prints the step.
const ts::StepTrace& quiz_step(ts::Session& session, QuizRecord& record) {
  const ts::StepTrace& step = session.step();
  const ts::LaneStep& lane = step.lanes.front();
  const ts::Tokenizer& tok = session.tokenizer();
  // The step just run is history index size() - 1: the window asks the same
  // question before running it, at index size(), and offers the same list.
  const std::vector<ts::QuizOption> list =
      ts::quiz_shortlist_for_step(lane.logits, tok, session.history().size() - 1);
  const std::string context = tok.decode(lane.context_ids);
  std::cout << "quiz: which token comes after \"" << ts::cli::printable(context) << "\"?\n ";
  for (size_t i = 0; i < list.size(); ++i)
    std::cout << " " << i + 1 << " \"" << ts::cli::printable(list[i].text) << "\"";
  std::cout << "\n";
  std::optional<ts::QuizGuess> guess;
  for (;;) {
    std::cout << "  your guess: 1-" << list.size() << ", or type a word, Enter = skip > "
              << std::flush;
    std::string line;
    if (!std::getline(std::cin, line)) {
      std::cout << "\n";
      break;
    }
    if (line.empty()) break;
    try {
      char* end = nullptr;
      const long n = std::strtol(line.c_str(), &end, 10);
      if (*end == '\0' && n >= 1 && n <= static_cast<long>(list.size()))
        guess = ts::score_guess(lane.logits, tok, list[n - 1].token, lane.chosen_token);
      else
        guess = ts::score_typed_guess(lane.logits, tok, line, lane.chosen_token, context);
      break;
    } catch (const ts::Error& e) {
      std::cout << "  " << e.what() << "\n";
    }
  }
  ts::QuizGuess model = ts::score_guess(lane.logits, tok, lane.chosen_token, lane.chosen_token);
  model.correct = model.beat_top1 = false;  // the model's own choice is not a guess
  std::cout << "reveal: the model chose " << ts::cli::printable(ts::describe_guess(model)) << "\n";
  if (guess) {
    // A long typed word is shown cut (only its first token is scored).
    ts::QuizGuess shown = *guess;
    shown.typed = ts::cli::clipped(shown.typed);
    shown.scored_as = ts::cli::clipped(shown.scored_as);
    std::cout << "  your guess " << ts::cli::printable(ts::describe_guess(shown)) << "\n";
  }
  record.resize(session.history().size());
  record.back() = guess;
  print_quiz_score(record);
  return step;
}

// Enter = next step, b = back, q = quit. Returns false to stop.
bool interactive_command(ts::Session& session, const ts::cli::CliOptions& o) {
  QuizRecord quiz;  // --quiz: each step's guess
  for (;;) {
    if (stopped()) return false;
    std::cout << "-- next: " << session.next_action() << "  [Enter] step  [b] back  [q] quit > "
              << std::flush;
    if (output_closed()) return false;
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
        if (o.quiz && quiz.size() > session.history().size()) {
          // The step undone takes its guess out of the score.
          quiz.resize(session.history().size());
          print_quiz_score(quiz);
        }
        ts::cli::print_lanes_text(std::cout, session);
        continue;
      }
      if (!line.empty()) {
        std::cout << "unknown command '" << ts::cli::printable(ts::cli::clipped(line))
                  << "': Enter = step, b = back, q = quit\n";
        continue;
      }
      if (!session.can_step()) {
        std::cout << "cannot step: " << session.next_action() << "\n";
        continue;
      }
      // A failed step ends the session (said once, by the caller): the
      // next one would fail the same way.
      const ts::StepTrace* taken = checked_step(session, [&]() -> const ts::StepTrace& {
        return o.quiz ? quiz_step(session, quiz) : session.step();
      });
      if (taken == nullptr) return false;
      const ts::StepTrace& step = *taken;
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

// --compare-precision / --compare-model: the prompt under two weight formats
// or two models, a row per step, then the summary. A signal or a closed
// output stops it between steps.
int run_precision(const ts::cli::CliOptions& o) {
  std::unique_ptr<ts::PrecisionCompare> cmp =
      o.compare_model.empty() ? ts::PrecisionCompare::load(o.setup, o.precision)
                              : ts::PrecisionCompare::load_models(o.setup, o.compare_model);
  cmp->set_prompt(o.prompt);
  ts::cli::print_precision_header(std::cout, *cmp);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  // Row 0 (the prefill) and --steps decode steps, as a plain run takes them.
  int rows = 0;
  for (; rows <= o.steps && cmp->can_step() && !stopped(); ++rows)
    ts::cli::print_precision_row(std::cout, *cmp, cmp->step());
  // Fewer rows than asked for because the context is full: say so, as a
  // plain run does.
  if (rows <= o.steps && !cmp->can_step() && !output_closed())
    std::cout << "[context end: the model holds " << cmp->context() << " tokens]\n";
  if (!output_closed()) ts::cli::print_precision_summary(std::cout, *cmp);
  if (g_interrupted != 0) {
    std::cerr << "tokenscope-cli: interrupted (" << signal_name(g_interrupted) << ")\n";
    return 128 + g_interrupted;
  }
  return 0;
}

int run(int argc, char** argv) {
  const ts::cli::CliOptions o = ts::cli::parse_cli(argc, argv);
  if (o.help) {
    std::cout << ts::cli::cli_help();
    return 0;
  }
  // A closed standard output is a failed write (output_closed), not a death.
  ::signal(SIGPIPE, SIG_IGN);
  // Checked before the model is loaded and anything is generated: a folder
  // where no file can be made, a directory, a /proc file.
  if (!o.json_file.empty()) ts::check_write_target(o.json_file);
  if (o.compare_precision || !o.compare_model.empty()) return run_precision(o);
  ts::ModelSetupOptions setup = o.setup;
  setup.cache_sequences = std::max(setup.cache_sequences, ts::cache_sequences_for(o.strategies));
  ts::LoadedModel model = ts::load_model_setup(setup);
  if (!model.backend_notice.empty()) std::cerr << "note: " << model.backend_notice << "\n";
  if (!o.eval_loss_file.empty()) return run_eval(model, o);
  if (!o.score.empty()) return run_score(model, o);

  // More steps than the context holds end at the context: no overflow below.
  const int n_ctx = model.engine->config().n_ctx;
  const int steps = std::min(o.steps, n_ctx);
  ts::SessionOptions so;
  so.record_attention = o.record_attention;
  so.kv_cache = o.kv_cache;
  so.max_new_tokens = steps + 1;
  ts::Session session(model.tokenizer, model.engine, so);
  session.set_strategies(o.strategies);
  // Speculative lanes: the draft model, on the same device, with a KV
  // sequence per speculative lane (and scratch). A vocabulary mismatch is
  // refused here, naming both sizes or the first id whose token differs.
  ts::LoadedModel draft;
  if (!o.draft_model.empty()) {
    const int spec_lanes = static_cast<int>(
        std::count_if(o.strategies.begin(), o.strategies.end(),
                      [](const ts::SamplingParams& p) { return p.speculative(); }));
    draft = ts::load_draft_model(setup, o.draft_model, spec_lanes + 2, model.tokenizer);
    session.set_draft_engine(draft.engine);
  }
  // On by default for the bundled model (no --model): the list is what keeps
  // its output fit for a classroom.
  session.set_banned_words(
      ts::load_banned_words(o.ban_words, *model.tokenizer, o.setup.model.empty()));
  session.set_prompt(o.prompt);
  if (!o.quiet)
    std::cout << "model " << model.name << " (" << model.engine->config().parameter_count()
              << " parameters) on " << model.engine->backend().name() << ": "
              << model.engine->backend().device_name() << "\n"
              << "loaded in " << milliseconds(model.load_seconds) << " ms, warm-up pass "
              << milliseconds(model.warmup_seconds)
              << " ms (neither is counted in any step's time)\n"
              << ts::describe_banned_words(session.banned_words().get()) << "\n";
  if (!o.quiet && draft.engine)
    std::cout << "draft model " << draft.name << " (" << draft.engine->config().parameter_count()
              << " parameters, " << draft.engine->config().n_layer << " layers) loaded in "
              << milliseconds(draft.load_seconds) << " ms\n";
  if (o.memory) print_memory(std::cout, "after load", ts::memory_report(session));
  // No SA_RESTART: a Ctrl-C also ends --interactive's wait for a line.
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  if (o.interactive) {
    interactive_command(session, o);
  } else if (o.strategies.size() > 1 && !o.quiet) {
    // --compare: lanes as columns, then how they compare.
    ts::cli::ComparePrinter printer(session);
    for (int i = 0; i <= steps && session.can_step() && !stopped(); ++i) {
      const ts::StepTrace* taken =
          checked_step(session, [&]() -> const ts::StepTrace& { return session.step(); });
      if (taken == nullptr) break;
      const ts::StepTrace& step = *taken;
      printer.print_row(std::cout, step);
      if (o.logit_lens) ts::cli::print_logit_lens(std::cout, session, step);
    }
    printer.print_summary(std::cout);
    std::cout << "\n";
    ts::cli::print_lanes_text(std::cout, session);
  } else {
    for (int i = 0; i <= steps && session.can_step() && !stopped(); ++i) {
      const ts::StepTrace* taken =
          checked_step(session, [&]() -> const ts::StepTrace& { return session.step(); });
      if (taken == nullptr) break;
      const ts::StepTrace& step = *taken;
      if (!o.quiet) ts::cli::print_step(std::cout, session, step, o.top);
      if (o.logit_lens) ts::cli::print_logit_lens(std::cout, session, step);
    }
    ts::cli::print_lanes_text(std::cout, session);
  }
  if (o.memory) print_memory(std::cout, "after the run", ts::memory_report(session));
  const int stop_signal = g_interrupted;
  // Stopped early by a signal, by the reader of standard output or by a
  // step that failed.
  const bool interrupted = stop_signal != 0 || output_closed() || !g_step_error.empty();
  if (!o.json_file.empty()) {
    ts::JsonExportOptions jo;
    jo.full_logits = o.json_full_logits;
    jo.attention = o.record_attention;
    ts::SessionFileOptions fo;
    fo.interrupted = interrupted;
    // A Ctrl-C that arrives while writing (not the one that ended generation).
    fo.cancel = [stop_signal] { return stop_signal == 0 && g_interrupted != 0; };
    // Everything printed so far comes first when FILE is /dev/stdout.
    std::cout.flush();
    try {
      ts::write_session_json(session, o.json_file, jo, fo);
    } catch (const ts::ExportCancelled&) {
      // Stopped while writing: nothing new was written. A previous run's file
      // would pass for this run's, so it goes too.
      std::error_code ignored;
      fs::remove(o.json_file, ignored);
      std::cerr << "tokenscope-cli: interrupted (" << signal_name(g_interrupted)
                << ") while writing " << o.json_file << "; nothing written\n";
      return 128 + g_interrupted;
    }
    if (!o.quiet)
      std::cout << "wrote " << o.json_file << (interrupted ? " (marked interrupted)" : "") << "\n";
  }
  if (stop_signal != 0) {
    std::cerr << "tokenscope-cli: interrupted (" << signal_name(stop_signal) << ")\n";
    return 128 + stop_signal;
  }
  if (!g_step_error.empty()) {
    std::cerr << "tokenscope-cli: " << g_step_error;
    if (!o.json_file.empty())
      std::cerr << "; " << o.json_file << " keeps the " << session.history().size()
                << " steps before it, marked \"interrupted\"";
    std::cerr << "\n";
    return 2;
  }
  // A reader that stopped reading ends the run without a word; any other
  // failure to write standard output (a full disk) is said.
  if (output_closed() && g_output_error != EPIPE) {
    std::cerr << "tokenscope-cli: cannot write to standard output ("
              << std::strerror(g_output_error) << ")\n";
    return 3;
  }
  return 0;
}

}  // namespace

// Exit codes: 0 done (also when the reader of standard output closed it), 2
// bad input (one line naming what is wrong), 3 internal error, 128 + the
// signal's number when stopped by SIGINT (130), SIGHUP (129) or SIGTERM (143).
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
