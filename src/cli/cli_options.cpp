#include "cli/cli_options.h"

#include <charconv>
#include <cmath>

#include "util/error.h"

namespace ts::cli {
namespace {

template <typename T>
T parse_number(const std::string& flag, const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) throw Error(flag + ": '" + text + "' is not a valid number");
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) throw Error(flag + ": '" + text + "' is not finite");
  }
  return value;
}

}  // namespace

std::string cli_help() {
  return R"(tokenscope-cli: step through GPT-2 inference one token at a time.

Usage: tokenscope-cli [options]

Model
  --model PATH            HF GPT-2 directory (config.json, model.safetensors, vocab.json,
                          merges.txt) or llm.c gpt2_*.bin; default: the bundled model
  --tokenizer DIR         directory with vocab.json + merges.txt (or encoder.json +
                          vocab.bpe); default: the model's directory
  --device auto|cpu|cuda  backend; auto takes CUDA when a device is present
  --threads N             CPU threads (default: all)

Generation
  --prompt TEXT           prompt (default: "Today's weather is so")
  --steps N               decode steps after prefill (default 16)
  --greedy                argmax (the default)
  --temperature T         sample with temperature T > 0
  --top-k K               keep the K most likely tokens (0 = off)
  --top-p P               nucleus sampling, P in (0, 1]
  --min-p M               drop tokens below M x the top probability, M in [0, 1]
  --repetition-penalty R  R > 0; 1 = off (applies to greedy too)
  --seed S                seed of the draw (same seed, same tokens)
  --strategy STR          a whole strategy, e.g. "top_p=0.9,temperature=0.8", or HF beam
                          search: "beams=4" (2..8), with length_penalty=F and
                          early_stopping=true|false|never
  --compare STR...        several lanes sharing one prefill, printed as columns step by
                          step (token and its probability; the first step where they
                          differ is marked), then per lane: log-probability, perplexity,
                          distinct 1/2/3-grams, tokens/s; e.g.
                          --compare greedy "top_p=0.9,temperature=0.8" "beams=4"
  --no-kv-cache           recompute the whole sequence at every decode step

Output
  --interactive           pause after every step: Enter = next, b = back, q = quit
  --top N                 alternatives printed per step (default 5)
  --json FILE             write the whole session trace as JSON
  --json-full-logits      include every logit of every step in the JSON
  --no-attention          do not record attention probabilities
  --quiet                 print only the generated text
  --logit-lens            after each step, the top-5 predictions read off the residual
                          stream after every layer (final layer norm + unembedding)
  --eval-loss FILE        print the model's mean next-token loss on a text file and exit
  --eval-window N         window for --eval-loss (default: the model's context)
  --help                  this text
)";
}

CliOptions parse_cli(int argc, char** argv) {
  CliOptions o;
  SamplingParams single;
  bool single_set = false;
  auto value = [&](int& i, const std::string& flag) -> std::string {
    if (i + 1 >= argc) throw Error(flag + " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h")
      o.help = true;
    else if (a == "--model")
      o.setup.model = value(i, a);
    else if (a == "--tokenizer")
      o.setup.tokenizer = value(i, a);
    else if (a == "--device")
      o.setup.device = value(i, a);
    else if (a == "--threads")
      o.setup.cpu_threads = parse_number<int>(a, value(i, a));
    else if (a == "--prompt")
      o.prompt = value(i, a);
    else if (a == "--steps")
      o.steps = parse_number<int>(a, value(i, a));
    else if (a == "--greedy") {
      single.do_sample = false;
      single_set = true;
    } else if (a == "--temperature") {
      single.temperature = parse_number<float>(a, value(i, a));
      single.do_sample = single_set = true;
    } else if (a == "--top-k") {
      single.top_k = parse_number<int>(a, value(i, a));
      single.do_sample = single_set = true;
    } else if (a == "--top-p") {
      single.top_p = parse_number<float>(a, value(i, a));
      single.do_sample = single_set = true;
    } else if (a == "--min-p") {
      single.min_p = parse_number<float>(a, value(i, a));
      single.do_sample = single_set = true;
    } else if (a == "--repetition-penalty") {
      single.repetition_penalty = parse_number<float>(a, value(i, a));
      single_set = true;
    } else if (a == "--seed") {
      single.seed = parse_number<uint64_t>(a, value(i, a));
      single_set = true;
    } else if (a == "--strategy") {
      const uint64_t seed = single.seed;
      single = parse_strategy(value(i, a));
      if (single.seed == 0) single.seed = seed;
      single_set = true;
    } else if (a == "--compare") {
      while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0)
        o.strategies.push_back(parse_strategy(argv[++i]));
      if (o.strategies.empty()) throw Error("--compare needs at least one strategy");
    } else if (a == "--no-kv-cache")
      o.kv_cache = false;
    else if (a == "--interactive")
      o.interactive = true;
    else if (a == "--top")
      o.top = parse_number<int>(a, value(i, a));
    else if (a == "--json")
      o.json_file = value(i, a);
    else if (a == "--json-full-logits")
      o.json_full_logits = true;
    else if (a == "--no-attention")
      o.record_attention = false;
    else if (a == "--quiet")
      o.quiet = true;
    else if (a == "--logit-lens")
      o.logit_lens = true;
    else if (a == "--eval-loss")
      o.eval_loss_file = value(i, a);
    else if (a == "--eval-window")
      o.eval_window = parse_number<int>(a, value(i, a));
    else
      throw Error("unknown option '" + a + "' (see --help)");
  }
  if (single_set && !o.strategies.empty())
    throw Error("give either --compare or single-lane strategy flags, not both");
  if (o.strategies.empty()) o.strategies.push_back(single);
  if (static_cast<int>(o.strategies.size()) > kMaxLanes)
    throw Error("--compare takes at most " + std::to_string(kMaxLanes) + " strategies");
  for (const SamplingParams& p : o.strategies) p.validate();
  if (o.steps < 0) throw Error("--steps must be >= 0");
  if (o.top < 1 || o.top > 100) throw Error("--top must be between 1 and 100");
  if (o.setup.cpu_threads < 0) throw Error("--threads must be >= 0");
  return o;
}

}  // namespace ts::cli
