#include "cli/cli_options.h"

#include <algorithm>
#include <climits>
#include <string_view>

#include "cli/step_printer.h"
#include "session/model_flags.h"
#include "util/error.h"

namespace ts::cli {

namespace {

// --score reads the model's probabilities of a given text: nothing is
// generated or sampled, so only these flags mean something beside it.
void check_score_flags(const std::vector<std::string>& given) {
  const std::vector<std::string> allowed = {"--score",  "--prompt",  "--top",
                                            "--json",   "--model",   "--tokenizer",
                                            "--device", "--weights", "--threads"};
  for (const std::string& g : given)
    if (std::find(allowed.begin(), allowed.end(), g) == allowed.end())
      throw Error("--score and " + g +
                  " conflict: --score scores the given text under the model, generating "
                  "nothing (it takes --prompt, --top, --json and the Model flags)");
}

// --quiz asks before each step of the interactive mode and follows one
// sampled or greedy lane (a beam lane's token is not one draw from one row).
void check_quiz_flags(const CliOptions& o, const std::vector<std::string>& given) {
  if (!o.interactive) throw Error("--quiz needs --interactive (it asks before each step)");
  if (std::find(given.begin(), given.end(), "--compare") != given.end())
    throw Error("--quiz and --compare conflict: the quiz follows one lane");
  if (o.strategies.front().num_beams > 1)
    throw Error(
        "--quiz and beam search conflict: a beam lane's token is not the choice of one step");
  if (o.strategies.front().speculative())
    throw Error(
        "--quiz and speculative decoding conflict: a speculative step commits a whole round");
}

// Speculative lanes need a draft model and the KV cache; a draft model needs
// a speculative lane to draft for.
void check_spec_flags(const CliOptions& o, const std::vector<std::string>& given) {
  const auto spec = std::find_if(o.strategies.begin(), o.strategies.end(),
                                 [](const SamplingParams& p) { return p.speculative(); });
  const bool draft = std::find(given.begin(), given.end(), "--draft-model") != given.end();
  if (spec == o.strategies.end()) {
    if (draft)
      throw Error(
          "--draft-model needs a speculative lane (--strategy spec=N, or spec=N in --compare)");
    return;
  }
  if (!draft)
    throw Error(format_strategy(*spec) +
                " needs --draft-model DIR (any model sharing the target's vocabulary; the "
                "target's own directory works)");
  if (!o.kv_cache)
    throw Error("--no-kv-cache and " + format_strategy(*spec) +
                " conflict: speculative decoding verifies the drafts over the cached prefix");
}

// --compare-precision and --compare-model run their own two greedy engines
// over --prompt: only these flags mean something beside them (--weights is
// --compare-precision's list itself; both models of --compare-model take it).
void check_comparison_flags(const std::vector<std::string>& given, const std::string& flag) {
  const bool models = flag == "--compare-model";
  std::vector<std::string> allowed = {flag,          "--prompt", "--steps", "--model",
                                      "--tokenizer", "--device", "--kv",    "--threads"};
  if (models) allowed.push_back("--weights");
  for (const std::string& g : given)
    if (std::find(allowed.begin(), allowed.end(), g) == allowed.end())
      throw Error(flag + " and " + g + " conflict: " + flag + " runs the prompt greedily under " +
                  (models ? "two models" : "its two formats") +
                  " (it takes --prompt, --steps, --model, --tokenizer, --device, --kv, --threads" +
                  (models ? ", --weights)" : ")"));
}

}  // namespace

std::string cli_help() {
  return std::string(R"(tokenscope-cli: step through GPT-2 inference one token at a time.

Usage: tokenscope-cli [options]

Model
)" + model_flags_help() +
                     draft_model_help() +
                     R"(
Generation
  --prompt TEXT           prompt (default: "Today's weather is so")
  --steps N               decode steps after prefill (default 16); generation also stops
                          at the end of the model's context
  --greedy                argmax (the default)
  --temperature T         sample with temperature T > 0
  --top-k K               keep the K most likely tokens (0 = off)
  --top-p P               nucleus sampling, P in (0, 1]
  --min-p M               drop tokens below M x the top probability, M in [0, 1]
  --repetition-penalty R  R > 0; 1 = off (applies to greedy too)
  --seed S                seed of the draw (same seed, same tokens); needs a sampling
                          flag, as a strategy's seed=S needs a sampling key; without
                          it the seed is 0, so a sampled run repeats its tokens every
                          time: give another seed for other draws
  --strategy STR          a whole strategy, e.g. "top_p=0.9,temperature=0.8", or HF beam
                          search: "beams=4" (2..8), with length_penalty=F and
                          early_stopping=true|false|never, or contrastive search:
                          "contrastive=4,alpha=0.6" (2..16 candidates run in one
                          forward; score = (1 - alpha) p - alpha x the largest cosine
                          similarity of its hidden state to an earlier one; alpha in
                          [0, 1], default 0.6, 0 = greedy; no sampling keys), or
                          speculative decoding: "spec=4" (greedy) or
                          "spec=4,top_p=0.9,temperature=0.8" (sampled): each step is one
                          round, the --draft-model proposes 4 tokens (1..16) and the model
                          verifies them in one pass, keeping the agreed prefix and adding
                          its own next token (greedy: exactly the plain greedy text;
                          sampled: the model's own distribution); "spec=auto" adapts the
                          draft length (+2 after a fully accepted round, else - 1), or
                          DoLa: "dola=low", "dola=high" or premature layers "dola=2,3" (0 =
                          embeddings; HF's rule: every second layer of the lower / upper
                          half, low from layer 2, which leaves a 3-layer model none: name
                          a layer there; the layer whose early-exit distribution
                          diverges most from the final one is contrasted: log p_final -
                          log p_layer over the tokens with p >= 0.1 x the top p; combines
                          with sampling keys and repetition_penalty, HF suggests 1.2), or
                          lookahead decoding: "lookahead" or "lookahead=W,N,G" (default
                          4,3,4: a 2D window of N-1 x W Jacobi guesses, an n-gram pool,
                          up to G pool n-grams verified in the same forward; no draft
                          model) or prompt lookup: "prompt_lookup" or "prompt_lookup=K,M"
                          (default 10,2: up to K tokens copied after the most recent
                          earlier match of the last M..1 tokens); a step is one pass that
                          commits 1 or more tokens, exactly greedy's (or, with sampling
                          keys, the model's own distribution); they need the KV cache
  --compare STR...        several lanes sharing one prefill, printed as columns step by
                          step (token and p, its probability in the distribution the
                          lane chose from: after its filters, DoLa's contrast, as in the
                          window's Lanes panel; the first step where they differ is
                          marked), then per lane: log-probability, perplexity,
                          distinct 1/2/3-grams, tokens/s; e.g.
                          --compare greedy "top_p=0.9,temperature=0.8" "beams=4"
                          "contrastive=4,alpha=0.6" "spec=4" "dola=low"; a speculative lane's
                          summary adds its acceptance rate and tokens per target pass
  --no-kv-cache           recompute the whole sequence at every decode step
)" + ban_words_help() +
                     R"(
Precision
  --compare-precision REF,FMT
                          run --prompt greedily under two weight formats of the same
                          checkpoint, e.g. f32,q8 or bf16,q4 (REF is the reference; each
                          of f32, bf16, f16, q8, q4, two different ones): the model is
                          loaded twice. FMT is teacher-forced on REF's tokens, so every
                          step compares the two on the same context, and a second FMT
                          sequence runs free (greedy on its own output) beside it. Per
                          step (0 = the prefill): KL(p_REF || p_FMT) in nats over the full
                          vocabulary at temperature 1 (in double), whether top-1 agrees,
                          the top-10 tokens that changed places (REF rank -> FMT rank),
                          the first step where the greedy tokens differ, and per format
                          the MB the step moves (weights in that format + KV) and its
                          measured time. Then a summary (mean KL, top-1 agreement,
                          first divergence, MB per decode step and median step time per
                          format) and both continuations. Raw greedy: no banned words.
                          q8 and q4 run on the CPU only (with either, --device auto
                          runs both there; --device cuda refuses them). Takes --prompt,
                          --steps and the Model flags except --weights
  --compare-model PATH    the same comparison between two models that share a vocabulary:
                          the reference is --model (default the bundled model), PATH the
                          compared one (e.g. assets/models/tokenscope-tiny-draft, or a
                          Llama-shaped model with the same tokenizer), loaded as
                          --draft-model is (same --device, --weights, --kv; its tokenizer
                          must give every id the reference's token, a mismatch is refused
                          naming the first id that differs). The rows and summary name
                          the two models; the summary adds each one's weight MB per step
                          and KV bytes per token (grouped-query attention caches fewer).
                          Not with --compare-precision
)" +
                     R"(
Output
  --interactive           pause after every step: Enter = next, b = back, q = quit
  --quiz                  with --interactive: before each step is shown, guess its token
                          from a shortlist (the model's top 5 and 3 distractors from ranks
                          6-50, shuffled) or type a word (after a word it is scored with
                          its leading space, "cold" as " cold"; a word of several tokens
                          scores its first); the reveal gives each guess's probability,
                          rank and surprisal and a running score (mean log-probability,
                          guesses that were the chosen token; b takes a step's guess out)
  --top N                 alternatives printed per step (default 5)
  --json FILE             write the whole session trace as JSON, step by step into a
                          temporary file renamed to FILE when complete (a symbolic
                          link is written through: the file it names gets the trace;
                          a device, FIFO or open file such as /dev/stdout is appended
                          to where it stands, never replaced); FILE is checked before
                          the model is loaded (a directory, a folder where no file can
                          be made, a /proc file are refused); Ctrl-C, SIGTERM or
                          SIGHUP stops generation and FILE then says "interrupted":
                          true (exit 128 + the signal: 130, 143, 129); a signal while
                          writing leaves no FILE. The window re-opens FILE (--open),
                          every lane included (speculative rounds, DoLa contrasts,
                          lookahead and prompt-lookup passes are stored whole)
  --json-full-logits      include every logit of every step in the JSON
  --no-attention          do not record attention probabilities
  --quiet                 print only the generated text (valid UTF-8: a character cut
                          between tokens is U+FFFD, as in --json's "text")
  --logit-lens            after each step, the top-5 predictions read off the residual
                          stream after every layer (final layer norm + unembedding)
  --memory                print where memory goes after loading and after the run, one
                          line per part: weights (read in / in place, resident),
                          KV pool (reserved, held, resident, bytes per token), trace
                          store and its budget, the forward's scratch, and the process's
                          resident memory (from /proc/self/status)
  --eval-loss FILE        print the model's mean next-token loss on a text file (at
                          most 64 MiB) as one JSON line and exit
  --eval-window N         window for --eval-loss, 2 up to the model's context (default:
                          the model's context)
  --help                  this text (wins over every other flag)

Score a text
  --score TEXT            score TEXT as the continuation of --prompt instead of generating:
                          one prefill over both, then per token of TEXT the model's
                          probability of it, its rank, its surprisal in bits and the
                          model's top alternatives there (--top N of them, default 5);
                          then the total log-probability and the perplexity. Give
                          --score twice to compare two continuations (the first token
                          where they differ, with its probability under each). With
                          --prompt "" TEXT is a whole text whose first token is the
                          context. --json FILE writes the same as JSON. Takes only
                          --prompt, --top, --json and the Model flags; a text longer
                          than the model's context is refused

Every flag is written "--flag value" or "--flag=value"; a value that itself starts
with "--" needs the second form.

Conflicting flags are refused with one line naming both, never resolved silently:
the single-lane strategy flags (--greedy, --temperature, --top-k, --top-p, --min-p,
--repetition-penalty, --seed) combine into one strategy, but not with --strategy
(a whole strategy: put every setting into its string) nor with --compare; --greedy
does not combine with --temperature, --top-k, --top-p, --min-p or --seed, and
--seed needs one of the first four; a flag given twice is refused (only --score
may be given twice); --eval-loss
takes only the Model flags and --eval-window; --interactive does not combine
with --quiet; spec=N needs --draft-model and the KV cache, and --draft-model needs
a spec=N lane. Exit codes: 0 done, 2 bad input (one line on stderr), 3 internal
error, 130 / 143 / 129 stopped by Ctrl-C / SIGTERM / SIGHUP. A reader that
closes standard output (e.g. "| head -1") stops generation quietly: exit 0,
nothing on stderr, and --json FILE is still written, marked "interrupted": true.
A model whose weights hold a NaN or an infinity is refused when it loads, naming
the tensor. A step whose logits are NaN all the same (sums that overflow) ends
the run like Ctrl-C, with exit 2: one line names the step, and --json FILE keeps
the steps before it, marked "interrupted": true.
)");
}

CliOptions parse_cli(int argc, char** argv) {
  CliOptions o;
  // --help wins over everything else on the line, even over a bad value.
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      o.help = true;
      return o;
    }
  SamplingParams single;
  std::vector<std::string> given;  // every flag seen, in order
  auto seen = [&](const char* flag) {
    return std::find(given.begin(), given.end(), flag) != given.end();
  };
  auto conflict = [](const std::string& a, const std::string& b, const std::string& why) {
    return Error(a + " and " + b + " conflict: " + why);
  };
  // The single-lane strategy flags; --strategy is a whole strategy by itself.
  const std::vector<std::string> strategy_flags = {
      "--greedy", "--temperature",        "--top-k", "--top-p",
      "--min-p",  "--repetition-penalty", "--seed",  "--strategy"};
  const std::vector<std::string> sampling_flags = {"--temperature", "--top-k", "--top-p", "--min-p",
                                                   "--seed"};
  auto is_in = [](const std::vector<std::string>& list, const std::string& f) {
    return std::find(list.begin(), list.end(), f) != list.end();
  };
  std::string precision_text;  // --compare-precision, checked once --device is known
  FlagReader r(argc, argv);
  while (r.next()) {
    const std::string a = r.flag();
    // Every flag but --score (two continuations to compare) is given once:
    // a second value is never silently taken over the first.
    if (a != "--score" && seen(a.c_str())) throw Error(a + " is given twice");
    if (is_in(strategy_flags, a) || a == "--compare") {
      for (const std::string& g : given) {
        if (!is_in(strategy_flags, g) && g != "--compare") continue;
        if (a == "--compare" && is_in(strategy_flags, g))
          throw conflict(g, a, "--compare takes each lane's whole strategy");
        if (g == "--compare") throw conflict(g, a, "--compare takes each lane's whole strategy");
        if (a == "--strategy" || g == "--strategy")
          throw conflict(g, a, "--strategy is a whole strategy; put every setting into its string");
        if ((a == "--greedy" && is_in(sampling_flags, g)) ||
            (g == "--greedy" && is_in(sampling_flags, a)))
          throw conflict(g, a, "--greedy does not sample");
      }
    }
    given.push_back(a);
    if (parse_model_flag(r, o.setup)) continue;
    if (parse_draft_model_flag(r, o.draft_model)) continue;
    if (parse_ban_words_flag(r, o.ban_words)) continue;
    if (a == "--prompt")
      o.prompt = r.value();
    else if (a == "--steps")
      o.steps = static_cast<int>(parse_whole_number(a, r.value(), 0, INT_MAX));
    else if (a == "--greedy") {
      r.no_value();
      single.do_sample = false;
    } else if (a == "--temperature") {
      single.temperature = parse_decimal(a, r.value());
      single.do_sample = true;
    } else if (a == "--top-k") {
      single.top_k = static_cast<int>(parse_whole_number(a, r.value(), 0, INT_MAX));
      single.do_sample = true;
    } else if (a == "--top-p") {
      single.top_p = parse_decimal(a, r.value());
      single.do_sample = true;
    } else if (a == "--min-p") {
      single.min_p = parse_decimal(a, r.value());
      single.do_sample = true;
    } else if (a == "--repetition-penalty") {
      single.repetition_penalty = parse_decimal(a, r.value());
    } else if (a == "--seed") {
      single.seed = parse_unsigned(a, r.value());
    } else if (a == "--strategy") {
      single = parse_strategy_flag(a, r.value());
    } else if (a == "--compare") {
      for (const std::string& s : r.values_up_to_next_flag())
        o.strategies.push_back(parse_strategy_flag(a, s));
      if (o.strategies.empty()) throw Error("--compare needs at least one strategy");
      if (static_cast<int>(o.strategies.size()) > kMaxLanes)
        throw Error("--compare takes at most " + std::to_string(kMaxLanes) + " strategies (got " +
                    std::to_string(o.strategies.size()) + ")");
    } else if (a == "--no-kv-cache") {
      r.no_value();
      o.kv_cache = false;
    } else if (a == "--interactive") {
      r.no_value();
      o.interactive = true;
    } else if (a == "--top")
      o.top = static_cast<int>(parse_whole_number(a, r.value(), 1, 100));
    else if (a == "--json")
      o.json_file = non_empty(a, r.value());
    else if (a == "--json-full-logits") {
      r.no_value();
      o.json_full_logits = true;
    } else if (a == "--no-attention") {
      r.no_value();
      o.record_attention = false;
    } else if (a == "--quiet") {
      r.no_value();
      o.quiet = true;
    } else if (a == "--logit-lens") {
      r.no_value();
      o.logit_lens = true;
    } else if (a == "--memory") {
      // The memory report (session/memory_report.h), printed by main.cpp.
      r.no_value();
      o.memory = true;
    } else if (a == "--eval-loss")
      o.eval_loss_file = non_empty(a, r.value());
    else if (a == "--eval-window")
      o.eval_window = static_cast<int>(parse_whole_number(a, r.value(), 2, INT_MAX));
    else if (a == "--score") {
      if (o.score.size() == 2)
        throw Error("--score is given at most twice (two continuations to compare)");
      o.score.push_back(r.value());
    } else if (a == "--quiz") {
      r.no_value();
      o.quiz = true;
    } else if (a == "--compare-precision") {
      o.compare_precision = true;
      precision_text = r.value();
    } else if (a == "--compare-model") {
      o.compare_model = non_empty(a, r.value());
    } else
      throw Error("unknown option '" + clipped(a) + "' (see --help)");
  }
  // Flags that would otherwise be ignored without a word.
  if (o.compare_precision) {
    o.precision = parse_precision_pair("--compare-precision", precision_text, o.setup.device);
    check_comparison_flags(given, "--compare-precision");
  }
  if (!o.compare_model.empty()) check_comparison_flags(given, "--compare-model");
  if (seen("--score")) check_score_flags(given);
  if (seen("--eval-loss")) {
    for (const std::string& g : given)
      if (g != "--eval-loss" && g != "--eval-window" && g != "--model" && g != "--tokenizer" &&
          g != "--device" && g != "--weights" && g != "--kv" && g != "--threads")
        throw conflict("--eval-loss", g,
                       "--eval-loss only prints the loss of a file as JSON (with --model, "
                       "--tokenizer, --device, --weights, --kv, --threads, --eval-window)");
  } else if (seen("--eval-window")) {
    throw Error("--eval-window needs --eval-loss FILE");
  }
  if (seen("--seed") && !single.do_sample)
    throw Error(
        std::string("--seed needs a sampling flag (--temperature, --top-k, --top-p or --min-p): ") +
        kSeedDrawsNothing);
  if (seen("--json-full-logits") && !seen("--json"))
    throw Error("--json-full-logits needs --json FILE");
  if (o.interactive && o.quiet)
    throw conflict("--interactive", "--quiet", "--interactive shows every step");
  if (o.strategies.empty()) o.strategies.push_back(single);
  for (const SamplingParams& p : o.strategies) p.validate();
  if (o.quiz) check_quiz_flags(o, given);
  if (o.eval_loss_file.empty() && o.score.empty()) check_spec_flags(o, given);
  return o;
}

}  // namespace ts::cli
