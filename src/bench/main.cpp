// tokenscope-bench: prefill and decode speed of a model on a backend, each
// figure printed beside the physical bound measured in the same run.
#include <sys/resource.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bench/random_checkpoint.h"
#include "bench/speculative_bench.h"
#include "engine/backend_factory.h"
#include "engine/cpu/machine_probe.h"
#include "engine/cpu/matmul.h"
#include "engine/engine.h"
#include "model/config_json.h"
#include "model/model_loader.h"
#include "sampling/speculative.h"
#include "session/cache_comparison.h"
#include "session/lane_summary.h"
#include "session/memory_report.h"
#include "session/model_flags.h"
#include "session/model_setup.h"
#include "session/session.h"
#include "util/error.h"

namespace {

using nlohmann::json;

struct BenchOptions {
  ts::ModelSetupOptions setup;  // --model, --device, --threads (shared with the other front ends)
  std::string write_random;     // write a random checkpoint here, then bench it
  std::string random_shape;     // its flag: --write-random-124m or --write-random-1.5b
  // The sizes' defaults are fitted to the model's context once it is known;
  // a size the user gave is checked against it instead.
  int prefill_tokens = 128;
  int context = 64;  // cached tokens before the decode steps
  bool prefill_given = false, context_given = false, spec_tokens_given = false;
  int decode_steps = 20;
  std::vector<int> lanes = {1, 2, 4, 8};
  std::vector<int> cache_compare;     // generation lengths for KV cache on vs off
  std::filesystem::path draft_model;  // --draft-model: speculative vs plain decoding
  std::vector<int> spec_gammas = {4, ts::kSpecGammaAuto};
  int spec_tokens = 64;
  bool spec_self_draft = false;  // also the model drafting for itself
  std::string spec_random_dir;   // --spec-random-pairs: write and bench the random pairs
  bool spec_only = false;        // skip the prefill / decode / lanes sections
  bool avx2_only = false;        // --cpu-vectors avx2: no AVX-512 skinny kernel
  bool help = false;
};

// Layers of the random 355M-shaped target that its first-layers draft keeps.
constexpr int kFirstLayersDraft = 4;
// Exit code when a speculative greedy output differs from plain greedy's.
constexpr int kExitMismatch = 1;

std::string help_text() {
  return R"(tokenscope-bench: prefill and decode speed, printed as JSON with the bounds
measured in the same run (memory read bandwidth, peak FMA throughput), the
load time, and where memory goes after loading and after the run.

)" + ts::model_flags_help() +
         R"(  --write-random-124m DIR write a random GPT-2-124M-shaped checkpoint to DIR (created
                          if missing) and benchmark it, instead of --model; with a
                          byte-level tokenizer, so tokenscope-cli runs it too
  --write-random-1.5b DIR the same in GPT-2 XL's shape (48 layers, 1600 dims: 6.2 GB)
  --prefill-tokens N      prompt length of the prefill measurement (default 128, or
                          the model's context when that is shorter)
  --context N             cached tokens before the decode measurement (default 64, or
                          half the model's context when that is shorter)
  --decode-steps N        decode steps measured (median reported; default 20), run
                          twice on new sequences: the second pass is reported, the
                          first (its KV cache pages possibly new to the process: a
                          page fault each) beside it as first_pass_*
  --lanes LIST            lane counts for the batched decode, each 1 to )" +
         std::to_string(ts::kMaxLanes) + R"(, e.g. 1,2,4,8
                          (default); ratio_to_one_lane divides by the 1-lane time,
                          measured even when 1 is not listed
  --cache-compare LIST    generation lengths for KV cache on vs off, e.g. 64,256 (a run
                          stops at the end of the model's context; its steps are listed)
  --draft-model DIR       also measure speculative decoding (greedy) with this draft
                          against plain greedy decoding of the model, same prompt and
                          number of new tokens: tokens/s of both (the decode steps'
                          measured time, best of three runs), the acceptance rate
                          alpha = accepted / drafted, the cost ratio c = one draft pass
                          over one plain decode step of the model (both measured in this
                          run), the speed-up predicted by
                          (1 - alpha^(g+1)) / ((1 - alpha)(g c + 1)) beside the measured
                          one (spec=auto: g = the mean drafted per round), and whether
                          each speculative output equals plain greedy's token for token
                          (a summary per pair on stderr, "outputs identical: yes/no");
                          the formula counts a verify pass (g + 1 tokens) as one plain
                          step: verify_pass_to_target_step says how far that holds;
                          the model and the draft need tokenizer files and the same
                          vocabulary
  --spec-self-draft       also the model drafting for itself (alpha = 1, c about 1)
  --cpu-vectors auto|avx2 auto (default): a CPU decode step's matrix products read the
                          weights with AVX-512 where the CPU has it; avx2: with AVX2
                          only, to compare the two on one machine (the layers give the
                          same bits either way, the logits differ in the last bits);
                          machine.cpu_decode_kernel says which ran (avx512,
                          avx2, or scalar in a build without AVX2)
  --spec-gamma LIST       draft lengths g measured, each 1 to 16 or auto (adaptive);
                          default 4,auto
  --spec-tokens N         new tokens generated per measurement, at least 2 (default 64,
                          or what the model's context holds after the prompt)
  --spec-only             only the speculative measurement (no prefill, decode or lanes)
  --spec-random-pairs DIR write random GPT-2-shaped checkpoints to DIR (about 2.3 GB;
                          created if missing) and measure speculative decoding on
                          three pairs with a 355M-shaped target (24 layers, 1024 dims):
                          a 124M-shaped draft (independent random weights: alpha near
                          chance), a draft made of the target's own embeddings and first
                          layers (the same tensors, )" +
         std::to_string(kFirstLayersDraft) + R"( of 24), and the target
                          drafting for itself; slow on a CPU (a 355M decode step takes
                          0.1 s or more); the other sections are not run
  --help                  this text

Flags are written "--flag value" or "--flag=value"; a flag given twice is
refused. Exit codes: 0 done, 1 a
speculative greedy output differed from plain greedy's, 2 bad input (one line
on stderr), 3 internal error.
)";
}

// "1,2,4": whole numbers in [lo, hi], no empty items.
std::vector<int> parse_list(const std::string& flag, const std::string& s, int lo, int hi) {
  if (s.empty()) throw ts::Error(flag + ": the list is empty");
  std::vector<int> out;
  size_t pos = 0;
  for (;;) {
    const size_t comma = s.find(',', pos);
    const std::string item =
        s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) throw ts::Error(flag + ": empty item in '" + s + "'");
    out.push_back(static_cast<int>(ts::parse_whole_number(flag, item, lo, hi)));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// Sizes are bounded here, before anything is allocated; the model's context
// bounds them again once it is known.
constexpr int kMaxTokens = 1 << 20;

BenchOptions parse(int argc, char** argv) {
  BenchOptions o;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      o.help = true;
      return o;
    }
  ts::FlagReader r(argc, argv);
  std::vector<std::string> given;
  while (r.next()) {
    const std::string a = r.flag();
    // A second value is never silently taken over the first.
    if (std::find(given.begin(), given.end(), a) != given.end())
      throw ts::Error(a + " is given twice");
    given.push_back(a);
    if (a == "--tokenizer")
      throw ts::Error("--tokenizer: the bench runs the model on random token ids, no tokenizer");
    if (ts::parse_model_flag(r, o.setup)) continue;
    if (ts::parse_draft_model_flag(r, o.draft_model)) continue;
    if (a == "--write-random-124m" || a == "--write-random-1.5b") {
      if (!o.write_random.empty())
        throw ts::Error(o.random_shape + " and " + a + " conflict: give one model");
      o.write_random = ts::non_empty(a, r.value());
      o.random_shape = a;
    } else if (a == "--prefill-tokens") {
      o.prefill_tokens = static_cast<int>(ts::parse_whole_number(a, r.value(), 1, kMaxTokens));
      o.prefill_given = true;
    } else if (a == "--context") {
      o.context = static_cast<int>(ts::parse_whole_number(a, r.value(), 1, kMaxTokens));
      o.context_given = true;
    } else if (a == "--decode-steps")
      o.decode_steps = static_cast<int>(ts::parse_whole_number(a, r.value(), 1, kMaxTokens));
    else if (a == "--lanes")
      o.lanes = parse_list(a, r.value(), 1, ts::kMaxLanes);
    else if (a == "--cache-compare")
      o.cache_compare = parse_list(a, r.value(), 1, kMaxTokens);
    else if (a == "--spec-gamma") {
      // Whole numbers and "auto" (adaptive), e.g. 2,4,auto.
      std::string v = r.value();
      if (v.empty()) throw ts::Error(a + ": the list is empty");
      std::vector<int> gammas;
      size_t pos = 0;
      for (;;) {
        const size_t comma = v.find(',', pos);
        const std::string item =
            v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (item.empty()) throw ts::Error(a + ": empty item in '" + v + "'");
        if (item == "auto")
          gammas.push_back(ts::kSpecGammaAuto);
        else
          for (int g : parse_list(a, item, ts::kMinSpecGamma, ts::kMaxSpecGamma))
            gammas.push_back(g);
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
      o.spec_gammas = gammas;
    } else if (a == "--spec-self-draft") {
      r.no_value();
      o.spec_self_draft = true;
    } else if (a == "--cpu-vectors") {
      const std::string v = r.value();
      if (v != "auto" && v != "avx2")
        throw ts::Error("--cpu-vectors: '" + v + "' is not auto or avx2");
      o.avx2_only = v == "avx2";
    } else if (a == "--spec-only") {
      r.no_value();
      o.spec_only = true;
    } else if (a == "--spec-random-pairs")
      o.spec_random_dir = ts::non_empty(a, r.value());
    else if (a == "--spec-tokens") {  // at least one decode step after the prefill's token
      o.spec_tokens = static_cast<int>(ts::parse_whole_number(a, r.value(), 2, kMaxTokens));
      o.spec_tokens_given = true;
    } else
      throw ts::Error("unknown option '" + a + "' (see --help)");
  }
  if (!o.spec_random_dir.empty()) {
    if (!o.setup.model.empty() || !o.write_random.empty() || !o.draft_model.empty() ||
        o.spec_self_draft)
      throw ts::Error(
          "--spec-random-pairs writes and benchmarks its own pairs: give no --model, "
          "--write-random-*, --draft-model or --spec-self-draft with it");
    return o;
  }
  const bool speculative = !o.draft_model.empty() || o.spec_self_draft;
  for (const std::string& g : given)
    if ((g == "--spec-gamma" || g == "--spec-tokens" || g == "--spec-only") && !speculative)
      throw ts::Error(g + " needs --draft-model DIR or --spec-self-draft");
  if (!o.setup.model.empty() && !o.write_random.empty())
    throw ts::Error("--model and " + o.random_shape + " conflict: give one model");
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<int> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> t(n);
  for (int& x : t) x = static_cast<int>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

ts::ForwardOptions trace_options(bool trace) {
  ts::ForwardOptions f;
  f.record_attention = trace;
  f.record_residuals = trace;
  return f;
}

json bench_prefill(ts::Engine& engine, const BenchOptions& o, const ts::cpu::MachineRoofs& roofs,
                   bool trace) {
  const auto tokens = random_tokens(o.prefill_tokens, engine.config().vocab_size, 1);
  std::vector<double> times;
  // One untimed run first: the forward after the roofs' 512 MB probe buffer
  // is freed took 1.8x a settled one here (228 vs 130 ms for 64 tokens of
  // the 124M shape on a 2-vCPU VM); what a front end's first step costs
  // after loading is ts_first_step's measurement (tests/soak), not this one.
  ts::ForwardResult r = engine.forward_scratch(tokens, trace_options(trace));
  for (int i = 0; i < 3; ++i) {
    r = engine.forward_scratch(tokens, trace_options(trace));
    times.push_back(r.seconds);
  }
  const double t = median(times);
  return {{"tokens", o.prefill_tokens},
          {"trace", trace},
          {"seconds", t},
          {"tokens_per_second", o.prefill_tokens / t},
          {"gflops", r.cost.flops / t * 1e-9},
          {"fraction_of_peak_flops", r.cost.flops / t / roofs.peak_flops}};
}

struct DecodeTiming {
  double median = 0;  // seconds
  double best = 0;    // fastest step: the least disturbed by other work on a shared machine
  ts::StepCost cost;
  // With a probe: its best pass, one pass run before every step, and the
  // passes' median (bytes/s).
  double bandwidth_best = 0;
  double bandwidth_median = 0;
  // The untimed first pass: its median step and the page faults its steps took.
  double first_pass_median = 0;
  long first_pass_page_faults = 0;
  long page_faults = 0;  // the timed pass's
};

long minor_page_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Seconds of one decode step for `lanes` sequences forked from a shared
// context, and the step's analytic cost. The steps run twice, each time on
// new sequences: the first pass may write KV pool pages this process has not
// touched yet, and the first write to each such 4 KB page is a page fault (13
// us each on a 2-vCPU VM, 24 in three of every four GPT-2 124M steps); the
// second pass gets the same blocks back (the cache hands out the lowest free
// blocks first), as does every later generation to the same length. The
// figures are the second pass's; the first pass's median and the page faults
// of both are reported beside them.
DecodeTiming decode_step_time(ts::Engine& engine, const BenchOptions& o, int lanes, bool trace,
                              ts::cpu::ReadBandwidthProbe* probe = nullptr) {
  auto& cache = engine.cache();
  const int v = engine.config().vocab_size;
  std::vector<double> times, bandwidths;
  ts::StepCost cost;
  double first_pass_median = 0;
  long first_pass_faults = 0, faults = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const ts::SeqId base = cache.create();
    engine.forward({{base, random_tokens(o.context, v, 2)}}, {});
    std::vector<ts::SeqId> seqs = {base};
    for (int i = 1; i < lanes; ++i) seqs.push_back(cache.fork(base));
    times.clear();
    bandwidths.clear();
    faults = 0;
    std::mt19937 rng(3);
    const int steps = std::min(o.decode_steps, engine.config().n_ctx - o.context);
    for (int s = 0; s < steps; ++s) {
      if (probe) bandwidths.push_back(probe->pass());
      std::vector<ts::ForwardRequest> reqs;
      for (ts::SeqId q : seqs) reqs.push_back({q, {static_cast<int>(rng() % v)}});
      const long faults_before = minor_page_faults();
      ts::ForwardResult r = engine.forward(reqs, trace_options(trace));
      faults += minor_page_faults() - faults_before;
      times.push_back(r.seconds);
      cost = r.cost;
    }
    for (ts::SeqId q : seqs) cache.release(q);
    if (pass == 0) {
      first_pass_median = median(times);
      first_pass_faults = faults;
    }
  }
  DecodeTiming t{median(times), *std::min_element(times.begin(), times.end()), cost};
  t.first_pass_median = first_pass_median;
  t.first_pass_page_faults = first_pass_faults;
  t.page_faults = faults;
  if (!bandwidths.empty()) {
    t.bandwidth_best = *std::max_element(bandwidths.begin(), bandwidths.end());
    t.bandwidth_median = median(bandwidths);
  }
  return t;
}

// One draft/target pair of the speculative section; `what` tells a reader
// what kind of pair it is (a trained draft, random weights, the target
// itself), so that its acceptance rate is not misread.
struct SpecPair {
  std::string name;
  std::filesystem::path target;
  std::filesystem::path draft;
  std::string what;
};

// A strategy's best run of three: its decode steps' measured time (prefill
// excluded), the tokens generated, and the speculative rounds of that run.
struct SpecRun {
  double seconds = 0;
  int steps = 0;
  std::vector<int> tokens;
  ts::bench::SpecRoundTotals rounds;
};

SpecRun measure_strategy(const ts::LoadedModel& target, const ts::LoadedModel& draft,
                         const ts::SamplingParams& p, const std::string& prompt, int new_tokens) {
  ts::SessionOptions so;
  so.max_new_tokens = new_tokens;
  so.record_attention = false;
  so.record_residuals = false;
  ts::Session s(target.tokenizer, target.engine, so);
  s.set_draft_engine(draft.engine);
  s.set_prompt(prompt);
  s.set_strategies({p});
  SpecRun best;
  // Best of three runs (greedy: the same tokens each time), the one least
  // disturbed by the machine's other work; its rounds are reported with it.
  for (int repeat = 0; repeat < 3; ++repeat) {
    if (repeat > 0) s.reset();
    s.prefill();
    SpecRun r;
    while (s.can_step()) {
      r.seconds += s.step().seconds;
      ++r.steps;
    }
    r.tokens = s.lanes()[0].generated;
    std::vector<const ts::SpecRound*> rounds;
    for (int step = 0; step < static_cast<int>(s.history().size()); ++step)
      if (const ts::LaneStep* ls = s.record(step, 0); ls && ls->spec)
        rounds.push_back(ls->spec.get());
    r.rounds = ts::bench::total_rounds(rounds);
    if (repeat == 0 || r.seconds < best.seconds) best = std::move(r);
  }
  return best;
}

std::string gamma_name(int g) {
  return g == ts::kSpecGammaAuto ? std::string("auto") : std::to_string(g);
}

// Speculative (greedy, spec=g with the draft) against plain greedy decoding
// of the target from the same prompt, for the same number of new tokens:
// each side's tokens/s, the acceptance rate alpha, the cost ratio c of one
// draft pass to one plain decode step (both measured in this run), and the
// speed-up predicted from them next to the measured one. `identical` turns
// false when a speculative output differs from plain greedy's.
json bench_spec_pair(const BenchOptions& o, const SpecPair& pair, bool& identical) {
  namespace fs = std::filesystem;
  // The vocabularies are compared from config.json before gigabytes of
  // weights are read, and again from the loaded models below.
  if (fs::is_directory(pair.target) && fs::is_directory(pair.draft) &&
      fs::exists(pair.target / "config.json") && fs::exists(pair.draft / "config.json"))
    ts::bench::check_spec_pair(ts::load_config_json(pair.target / "config.json"),
                               ts::load_config_json(pair.draft / "config.json"),
                               "pair " + pair.name);
  ts::ModelSetupOptions setup = o.setup;
  setup.model = pair.target;
  setup.cache_sequences = 3;
  const ts::LoadedModel target = ts::load_model_setup(setup);
  const ts::LoadedModel draft = ts::load_draft_model(setup, pair.draft, 3);
  ts::bench::check_spec_pair(target.engine->config(), draft.engine->config(), "pair " + pair.name);
  const std::string prompt = "Once upon a time";
  const int n_ctx = target.engine->config().n_ctx;
  const int room = n_ctx - static_cast<int>(target.tokenizer->encode_ids(prompt).size());
  // The default fits the model's context; a number given is checked against it.
  const int new_tokens = o.spec_tokens_given ? o.spec_tokens : std::min(o.spec_tokens, room);
  if (new_tokens > room)
    throw ts::Error("--spec-tokens: " + std::to_string(o.spec_tokens) +
                    " does not fit the model's context of " + std::to_string(n_ctx));
  if (new_tokens < 2)
    throw ts::Error("the model's context of " + std::to_string(n_ctx) +
                    " leaves no room for 2 new tokens after the prompt");
  const SpecRun plain = measure_strategy(target, draft, ts::SamplingParams{}, prompt, new_tokens);
  // Tokens after the prefill's: the ones the decode steps made.
  const double plain_tps = static_cast<double>(plain.tokens.size() - 1) / plain.seconds;
  const double plain_step = plain.seconds / plain.steps;
  char line[256];
  std::snprintf(line, sizeof line, "  plain greedy: %zu tokens, %.1f tokens/s (%.2f ms a step)\n",
                plain.tokens.size(), plain_tps, plain_step * 1e3);
  std::cerr << "pair " << pair.name << ": " << pair.what << "\n" << line;
  json runs = json::array();
  for (int g : o.spec_gammas) {
    ts::SamplingParams p;
    p.spec_gamma = g;
    const SpecRun r = measure_strategy(target, draft, p, prompt, new_tokens);
    const ts::bench::SpecRoundTotals& t = r.rounds;
    const double alpha = t.acceptance_rate();
    const double c = ts::bench::cost_ratio(t.seconds_per_draft_pass(), plain_step);
    // The formula's g: the one asked for; spec=auto's is the mean drafted
    // per round (rounds clamped near the end count as drafted).
    const double gamma = g == ts::kSpecGammaAuto ? t.mean_gamma() : g;
    const double predicted = gamma > 0 ? ts::bench::predicted_speedup(alpha, gamma, c) : 0;
    const double tps = static_cast<double>(r.tokens.size() - 1) / r.seconds;
    const bool same = r.tokens == plain.tokens;
    identical = identical && same;
    std::snprintf(line, sizeof line,
                  "  spec=%s: %.1f tokens/s, measured x%.3f, predicted x%.3f (alpha %.3f = %d/%d, "
                  "c %.3f, g %.2f; a verify pass took %.2f plain steps)\n  outputs identical: %s\n",
                  gamma_name(g).c_str(), tps, tps / plain_tps, predicted, alpha, t.accepted,
                  t.drafted, c, gamma, t.seconds_per_verify_pass() / plain_step,
                  same ? "yes" : "no");
    std::cerr << line;
    // g as a number, spec=auto as "auto".
    runs.push_back({{"gamma", g == ts::kSpecGammaAuto ? json("auto") : json(g)},
                    {"gamma_in_prediction", gamma},
                    {"mean_gamma_drafted", t.mean_gamma()},
                    {"tokens", r.tokens.size()},
                    {"same_tokens_as_plain", same},
                    {"rounds", t.rounds},
                    {"drafted", t.drafted},
                    {"accepted", t.accepted},
                    {"acceptance_rate", alpha},
                    {"tokens_per_target_pass", t.rounds ? double(t.committed) / t.rounds : 0.0},
                    {"plain_tokens_per_s", plain_tps},
                    {"speculative_tokens_per_s", tps},
                    {"speedup_measured", tps / plain_tps},
                    {"draft_pass_ms", t.seconds_per_draft_pass() * 1e3},
                    {"draft_to_target_cost_c", c},
                    {"verify_pass_to_target_step", t.seconds_per_verify_pass() / plain_step},
                    {"speedup_predicted", predicted},
                    {"draft_seconds", t.draft_seconds},
                    {"verify_seconds", t.verify_seconds},
                    {"seconds", r.seconds}});
  }
  return {{"pair", pair.name},
          {"what", pair.what},
          {"target", pair.target.string()},
          {"draft", pair.draft.string()},
          {"target_parameters", target.engine->config().parameter_count()},
          {"draft_parameters", draft.engine->config().parameter_count()},
          {"prompt", prompt},
          {"new_tokens", new_tokens},
          {"plain_tokens", plain.tokens.size()},
          {"plain_tokens_per_s", plain_tps},
          {"plain_ms_per_step", plain_step * 1e3},
          {"runs", runs}};
}

// The pairs the options name: the model with --draft-model, the model with
// itself (--spec-self-draft), or the random GPT-2-shaped pairs written to
// --spec-random-pairs DIR.
std::vector<SpecPair> spec_pairs(const BenchOptions& o, const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::vector<SpecPair> pairs;
  if (!o.spec_random_dir.empty()) {
    const fs::path dir = o.spec_random_dir;
    const ts::ModelConfig big = ts::bench::gpt2_355m_config();
    ts::ModelConfig first = big;
    first.n_layer = kFirstLayersDraft;
    std::cerr << "writing random checkpoints to " << dir.string() << "\n";
    ts::bench::write_random_checkpoint(big, dir / "random-355m", 355);
    ts::bench::write_random_checkpoint(ts::bench::gpt2_124m_config(), dir / "random-124m", 124);
    ts::bench::write_random_checkpoint(first, dir / "random-355m-first-layers", 355, big.n_layer);
    pairs.push_back(
        {"random-355m/random-124m", dir / "random-355m", dir / "random-124m",
         "random weights, 355M-shaped target (24 layers, 1024 dims), 124M-shaped "
         "draft (12 layers, 768 dims), independent weights: their choices rarely agree, "
         "this pair shows the cost side of speculative decoding"});
    pairs.push_back({"random-355m/first-" + std::to_string(kFirstLayersDraft) + "-layers",
                     dir / "random-355m", dir / "random-355m-first-layers",
                     "random weights; the draft is the target's own embeddings and first " +
                         std::to_string(kFirstLayersDraft) +
                         " of 24 layers (the same tensors): a cheap draft sharing the target's "
                         "embeddings"});
    pairs.push_back({"random-355m/self", dir / "random-355m", dir / "random-355m",
                     "the target drafting for itself: alpha = 1 by construction, c about 1 "
                     "(the formula's upper end for acceptance, no speed-up possible)"});
    return pairs;
  }
  if (!o.draft_model.empty())
    pairs.push_back({"model/draft", model_dir, o.draft_model,
                     "the model with the draft given by --draft-model"});
  if (o.spec_self_draft)
    pairs.push_back({"model/self", model_dir, model_dir,
                     "the model drafting for itself: alpha = 1 by construction, c about 1"});
  return pairs;
}

json bench_speculative(const BenchOptions& o, const std::string& model_dir, bool& identical) {
  json pairs = json::array();
  for (const SpecPair& p : spec_pairs(o, model_dir))
    pairs.push_back(bench_spec_pair(o, p, identical));
  return {{"pairs", pairs}, {"outputs_identical", identical}};
}

// After the JSON: one line saying why the exit code is not 0.
int mismatch_exit() {
  std::cerr << "tokenscope-bench: a speculative greedy output differs from plain greedy's "
               "(see \"outputs identical: no\" above)\n";
  return kExitMismatch;
}

// Greedy generation of n tokens with and without the KV cache: same tokens,
// measured totals (session/cache_comparison).
json cache_compare(ts::Engine& engine, int n) {
  const std::vector<int> prompt = random_tokens(8, engine.config().vocab_size, 4);
  return ts::cache_comparison_to_json(ts::compare_kv_cache(engine, prompt, {}, n));
}

// The model benchmarked: --model, the random checkpoint written first for
// --write-random-*, or else the bundled model, as the other front ends.
std::string bench_model_dir(const BenchOptions& o) {
  if (!o.write_random.empty()) {
    ts::bench::write_random_checkpoint(o.random_shape == "--write-random-1.5b"
                                           ? ts::bench::gpt2_1558m_config()
                                           : ts::bench::gpt2_124m_config(),
                                       o.write_random, 124);
    return o.write_random;
  }
  if (!o.setup.model.empty()) return o.setup.model.string();
  const std::filesystem::path bundled = ts::default_model_path();
  std::error_code ec;
  if (!std::filesystem::exists(bundled, ec))
    throw ts::Error("bundled model not found at " + bundled.string() +
                    ": pass --model DIR, --write-random-124m DIR or --write-random-1.5b DIR");
  return bundled.string();
}

int run(int argc, char** argv) {
  {
    BenchOptions o = parse(argc, argv);
    if (o.help) {
      std::cout << help_text();
      return 0;
    }
    ts::cpu::allow_avx512(!o.avx2_only);
    // A speculative-only run: its pairs load their own models.
    if (!o.spec_random_dir.empty() || o.spec_only) {
      const std::string model_dir = o.spec_random_dir.empty() ? bench_model_dir(o) : "";
      bool identical = true;
      const json report = {{"speculative", bench_speculative(o, model_dir, identical)}};
      std::cout << report.dump(2) << std::endl;
      return identical ? 0 : mismatch_exit();
    }
    const std::string model_dir = bench_model_dir(o);
    const auto load_start = std::chrono::steady_clock::now();
    auto weights = std::make_shared<const ts::ModelWeights>(ts::load_model(model_dir));
    const int n_ctx = weights->config.n_ctx;
    // The defaults fit the model; the sizes given are checked below.
    if (n_ctx < 2)
      throw ts::Error(model_dir + ": a context of " + std::to_string(n_ctx) +
                      " leaves no room for a decode step after a cached token");
    if (!o.context_given) o.context = std::min(o.context, n_ctx / 2);
    if (!o.prefill_given) o.prefill_tokens = std::min(o.prefill_tokens, n_ctx);
    // Checked before the KV cache is allocated.
    if (o.context + 1 > n_ctx)
      throw ts::Error("--context: " + std::to_string(o.context) + " is out of range, at most " +
                      std::to_string(n_ctx - 1) + " (the model's context minus the decoded token)");
    if (o.prefill_tokens > n_ctx)
      throw ts::Error("--prefill-tokens: " + std::to_string(o.prefill_tokens) +
                      " is out of range, at most the model's context of " + std::to_string(n_ctx));
    ts::BackendSelection sel = ts::make_backend(o.setup.device, weights, o.setup.cpu_threads);
    if (!sel.notice.empty()) std::cerr << "note: " << sel.notice << "\n";
    int max_lanes = 1;
    for (int k : o.lanes) max_lanes = std::max(max_lanes, k);
    // Every lane's sequence may own whole blocks up to the context (plus the
    // shared base and one scratch sequence): sized in blocks, not tokens.
    const ts::KvCacheSize kv =
        ts::kv_cache_size_for(weights->config, max_lanes + 2, 16, sel.backend.get());
    ts::Engine engine(weights, std::move(sel.backend), kv.tokens);
    const ts::ModelConfig& cfg = engine.config();
    // Weights read into memory (or a populated map), backend and KV pool set up.
    const double load_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    const json memory_after_load = ts::memory_report_json(ts::memory_report(engine));

    const ts::cpu::MachineRoofs roofs =
        ts::measure_bench_roofs(engine.backend(), o.setup.cpu_threads);
    json report = {{"model", model_dir},
                   {"parameters", cfg.parameter_count()},
                   {"weight_bytes_fp32", cfg.parameter_count() * 4},
                   {"backend", engine.backend().name()},
                   {"device", engine.backend().device_name()},
                   {"machine",
                    {{"read_bandwidth_gb_per_s", roofs.read_bandwidth * 1e-9},
                     {"peak_gflops", roofs.peak_flops * 1e-9},
                     {"threads", roofs.threads},
                     {"cpu_decode_kernel", ts::cpu::decode_kernel()}}},
                   {"load_seconds", load_seconds}};
    report["prefill"] = {bench_prefill(engine, o, roofs, false),
                         bench_prefill(engine, o, roofs, true)};
    json decode = json::array();
    // On the CPU one probe pass runs before every decode step, so that the
    // steps and the bound they are divided by see the same neighbours on a
    // shared machine; best step over best pass, median over median. (A
    // GPU's bandwidth is probed once, right before the steps.)
    std::unique_ptr<ts::cpu::ReadBandwidthProbe> probe;
    if (engine.backend().name() == "cpu")
      probe = std::make_unique<ts::cpu::ReadBandwidthProbe>(512ll << 20, o.setup.cpu_threads);
    for (bool trace : {false, true}) {
      const double probed =
          probe ? 0 : ts::measure_bench_bandwidth(engine.backend(), o.setup.cpu_threads);
      const DecodeTiming t = decode_step_time(engine, o, 1, trace, probe.get());
      const double bandwidth = probe ? t.bandwidth_best : probed;
      const double bandwidth_median = probe ? t.bandwidth_median : probed;
      const double bound = t.cost.bytes() / bandwidth;
      const double bound_median = t.cost.bytes() / bandwidth_median;
      const double weight_bound = t.cost.weight_bytes / bandwidth;
      const double weight_bound_median = t.cost.weight_bytes / bandwidth_median;
      decode.push_back({{"trace", trace},
                        {"context", o.context},
                        {"read_bandwidth_gb_per_s", bandwidth * 1e-9},
                        {"read_bandwidth_median_gb_per_s", bandwidth_median * 1e-9},
                        {"bandwidth_probe", probe ? "one pass before every step" : "once"},
                        {"ms_per_step_median", t.median * 1e3},
                        {"ms_per_step_best", t.best * 1e3},
                        {"bytes_per_step", t.cost.bytes()},
                        {"memory_bound_ms", bound * 1e3},
                        {"ratio_to_memory_bound_median", t.median / bound_median},
                        {"ratio_to_memory_bound_best", t.best / bound},
                        {"weights_only_bound_ms", weight_bound * 1e3},
                        {"ratio_to_weight_read_median", t.median / weight_bound_median},
                        {"ratio_to_weight_read_best", t.best / weight_bound},
                        {"page_faults", t.page_faults},
                        {"first_pass_ms_per_step_median", t.first_pass_median * 1e3},
                        {"first_pass_page_faults", t.first_pass_page_faults}});
    }
    report["decode"] = decode;
    json lanes = json::array();
    // ratio_to_one_lane divides by the 1-lane time whatever the list's order;
    // it is measured first when the list does not name 1.
    std::vector<DecodeTiming> timings;
    double one_lane = 0;
    for (int k : o.lanes) {
      timings.push_back(decode_step_time(engine, o, k, false));
      if (k == 1 && one_lane == 0) one_lane = timings.back().median;
    }
    if (one_lane == 0) one_lane = decode_step_time(engine, o, 1, false).median;
    for (size_t i = 0; i < o.lanes.size(); ++i) {
      const int k = o.lanes[i];
      const DecodeTiming& t = timings[i];
      lanes.push_back({{"lanes", k},
                       {"ms_per_step", t.median * 1e3},
                       {"ratio_to_one_lane", t.median / one_lane},
                       {"flops_per_byte", t.cost.intensity()},
                       {"gflops", t.cost.flops / t.median * 1e-9}});
    }
    report["lanes"] = lanes;
    json compare = json::array();
    for (int n : o.cache_compare) compare.push_back(cache_compare(engine, n));
    if (!compare.empty()) report["kv_cache_on_vs_off"] = compare;
    bool identical = true;
    if (!o.draft_model.empty() || o.spec_self_draft)
      report["speculative"] = bench_speculative(o, model_dir, identical);
    report["device_after_run"] = engine.backend().device_name();  // e.g. graphs captured
    // Where memory goes (session/memory_report.h): after loading, and after
    // every measurement above (their sequences released; the KV pool's pages
    // written so far stay resident and are reused).
    report["memory"] = {{"after_load", memory_after_load},
                        {"after_run", ts::memory_report_json(ts::memory_report(engine))}};
    std::cout << report.dump(2) << std::endl;
    return identical ? 0 : mismatch_exit();
  }
}

}  // namespace

// Exit codes: 0 done, 1 a speculative greedy output differed from plain
// greedy's, 2 bad input (one line naming what is wrong), 3 internal error.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const ts::Error& e) {
    std::cerr << "tokenscope-bench: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "tokenscope-bench: out of memory\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "tokenscope-bench: internal error: " << e.what() << "\n";
    return 3;
  } catch (...) {
    std::cerr << "tokenscope-bench: internal error (unknown exception)\n";
    return 3;
  }
}
