#include "bench/speculative_bench.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <utility>

#include "bench/options.h"
#include "bench/random_checkpoint.h"
#include "model/config_json.h"
#include "session/model_setup.h"
#include "session/session.h"
#include "session/speculative_lane.h"
#include "util/error.h"

namespace ts::bench {

double predicted_speedup(double alpha, double gamma, double c) {
  if (!(alpha >= 0.0 && alpha <= 1.0))
    throw Error("predicted speed-up: the acceptance rate " + std::to_string(alpha) +
                " is outside [0, 1]");
  if (!(gamma > 0.0) || !std::isfinite(gamma))
    throw Error("predicted speed-up: the draft length " + std::to_string(gamma) +
                " is not positive");
  if (!(c >= 0.0) || !std::isfinite(c))
    throw Error("predicted speed-up: the cost ratio " + std::to_string(c) + " is negative");
  const double cost = gamma * c + 1.0;  // in target decode steps
  // Tokens a round commits: 1 + α + ... + α^γ, whose closed form divides by
  // zero at α = 1, where it is γ + 1.
  const double tokens =
      alpha == 1.0 ? gamma + 1.0 : (1.0 - std::pow(alpha, gamma + 1.0)) / (1.0 - alpha);
  return tokens / cost;
}

double SpecRoundTotals::acceptance_rate() const {
  return drafted ? static_cast<double>(accepted) / drafted : 0.0;
}
double SpecRoundTotals::mean_gamma() const {
  return rounds ? static_cast<double>(drafted) / rounds : 0.0;
}
double SpecRoundTotals::seconds_per_draft_pass() const {
  return draft_passes ? draft_seconds / draft_passes : 0.0;
}
double SpecRoundTotals::seconds_per_verify_pass() const {
  return rounds ? verify_seconds / rounds : 0.0;
}

SpecRoundTotals total_rounds(const std::vector<const SpecRound*>& rounds) {
  SpecRoundTotals t;
  for (const SpecRound* r : rounds) {
    if (!r) continue;
    ++t.rounds;
    t.drafted += r->gamma;
    t.accepted += r->accepted;
    t.committed += static_cast<int>(r->committed.size());
    t.draft_passes += r->draft_passes;
    t.draft_seconds += r->draft_seconds;
    t.verify_seconds += r->verify_seconds;
  }
  return t;
}

double cost_ratio(double draft_pass_seconds, double target_step_seconds) {
  if (!(target_step_seconds > 0.0) || !std::isfinite(target_step_seconds))
    throw Error("cost ratio: the target's decode step time is not positive");
  if (!(draft_pass_seconds >= 0.0) || !std::isfinite(draft_pass_seconds))
    throw Error("cost ratio: the draft pass time is negative");
  return draft_pass_seconds / target_step_seconds;
}

void check_spec_pair(const ModelConfig& target, const ModelConfig& draft, const std::string& what) {
  const std::string mismatch = spec_vocab_mismatch(target, draft);
  if (!mismatch.empty()) throw Error(what + ": " + mismatch);
}

namespace {

using nlohmann::json;

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
  SpecRoundTotals rounds;
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
    r.rounds = total_rounds(rounds);
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
    check_spec_pair(ts::load_config_json(pair.target / "config.json"),
                    ts::load_config_json(pair.draft / "config.json"), "pair " + pair.name);
  ts::ModelSetupOptions setup = o.setup;
  setup.model = pair.target;
  setup.cache_sequences = 3;
  const ts::LoadedModel target = ts::load_model_setup(setup);
  const ts::LoadedModel draft = ts::load_draft_model(setup, pair.draft, 3, target.tokenizer);
  check_spec_pair(target.engine->config(), draft.engine->config(), "pair " + pair.name);
  const std::string prompt = "Once upon a time";
  const int n_ctx = target.engine->config().n_ctx;
  const int room = n_ctx - static_cast<int>(target.tokenizer->model_input_ids(prompt).size());
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
    const SpecRoundTotals& t = r.rounds;
    const double alpha = t.acceptance_rate();
    const double c = cost_ratio(t.seconds_per_draft_pass(), plain_step);
    // The formula's g: the one asked for; spec=auto's is the mean drafted
    // per round (rounds clamped near the end count as drafted).
    const double gamma = g == ts::kSpecGammaAuto ? t.mean_gamma() : g;
    const double predicted = gamma > 0 ? predicted_speedup(alpha, gamma, c) : 0;
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
    const ts::ModelConfig big = gpt2_355m_config();
    ts::ModelConfig first = big;
    first.n_layer = kFirstLayersDraft;
    std::cerr << "writing random checkpoints to " << dir.string() << "\n";
    write_random_checkpoint(big, dir / "random-355m", 355);
    write_random_checkpoint(gpt2_124m_config(), dir / "random-124m", 124);
    write_random_checkpoint(first, dir / "random-355m-first-layers", 355, big.n_layer);
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

}  // namespace

json bench_speculative(const BenchOptions& o, const std::string& model_dir, bool& identical) {
  json pairs = json::array();
  for (const SpecPair& p : spec_pairs(o, model_dir))
    pairs.push_back(bench_spec_pair(o, p, identical));
  return {{"pairs", pairs}, {"outputs_identical", identical}};
}

}  // namespace ts::bench
