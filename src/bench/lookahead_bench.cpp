#include "bench/lookahead_bench.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <vector>

#include "bench/timing.h"
#include "model/tokenizer.h"
#include "sampling/sampling_params.h"
#include "sampling/sampling_pipeline.h"
#include "session/lookahead_lane.h"
#include "session/model_setup.h"
#include "util/error.h"

namespace ts::bench {
namespace {

using nlohmann::json;

struct Text {
  const char* kind;
  const char* text;
};

// One ordinary prompt and three that repeat themselves.
const Text kTexts[] = {
    {"ordinary", "The history of the old town begins with a small market by the river, where"},
    {"list", "Shopping list:\n1. apples\n2. pears\n3. plums\n4. bread\n5. milk\n6."},
    {"poem",
     "Row, row, row your boat,\nGently down the stream.\nMerrily, merrily, merrily, merrily,\n"
     "Life is but a dream.\nRow, row, row your boat,\nGently down the stream.\n"},
    {"code",
     "for (int i = 0; i < n; ++i) {\n  a[i] = b[i] + c[i];\n}\nfor (int i = 0; i < n; ++i) {\n"
     "  d[i] = e[i] + f[i];\n}\nfor (int i = 0; i < n; ++i) {\n"},
};

// What one method did to generate the tokens.
struct Outcome {
  std::vector<int> tokens;
  int passes = 0;
  int fed = 0;
  double seconds = 0;
  double predicted_seconds = 0;  // the cost model's time of every pass, on the roofs
};

double roof_time(const StepCost& c, const cpu::MachineRoofs& roofs) {
  return std::max(c.flops / roofs.peak_flops, c.bytes() / roofs.read_bandwidth);
}

Outcome run_greedy(Engine& engine, const std::vector<int>& prompt, int n,
                   const cpu::MachineRoofs& roofs) {
  Outcome o;
  const SeqId seq = engine.cache().create();
  engine.forward({{seq, std::vector<int>(prompt.begin(), prompt.end() - 1)}}, {});
  std::vector<int> ctx = prompt;
  const SamplingParams greedy;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    ForwardResult r = engine.forward({{seq, {ctx.back()}}}, {});
    o.predicted_seconds += roof_time(r.cost, roofs);
    ctx.push_back(sample_next(r.outputs[0].logits, ctx, greedy, i).draw.chosen_token);
    ++o.passes;
    ++o.fed;
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  o.tokens.assign(ctx.begin() + static_cast<long>(prompt.size()), ctx.end());
  engine.cache().release(seq);
  return o;
}

Outcome run_passes(Engine& engine, const std::vector<int>& prompt, int n,
                   const SamplingParams& params, const cpu::MachineRoofs& roofs) {
  Outcome o;
  const SeqId seq = engine.cache().create();
  engine.forward({{seq, std::vector<int>(prompt.begin(), prompt.end() - 1)}}, {});
  std::vector<int> ctx = prompt;
  std::shared_ptr<const LookaheadState> state;
  if (params.lookahead_on) state = initial_lookahead_state(params.lookahead, prompt);
  const LookaheadContext lc{engine, nullptr, {}};
  const auto t0 = std::chrono::steady_clock::now();
  while (static_cast<int>(ctx.size() - prompt.size()) < n) {
    LookaheadPass p = run_lookahead_pass(lc, seq, ctx, static_cast<int>(ctx.size() - prompt.size()),
                                         params, state);
    if (p.state_after) state = p.state_after;
    o.predicted_seconds += roof_time(p.cost, roofs);
    ctx.insert(ctx.end(), p.committed.begin(), p.committed.end());
    ++o.passes;
    o.fed += p.fed();
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  o.tokens.assign(ctx.begin() + static_cast<long>(prompt.size()),
                  ctx.begin() + static_cast<long>(prompt.size()) + n);
  engine.cache().release(seq);
  return o;
}

std::vector<int> encode(const Tokenizer& tok, const char* text) {
  return tok.model_input_ids(text);
}

}  // namespace

json bench_lookahead(Engine& engine, const std::string& model_dir, const cpu::MachineRoofs& roofs,
                     int tokens, bool& identical) {
  namespace fs = std::filesystem;
  const fs::path own = fs::is_directory(model_dir) ? fs::path(model_dir) : fs::path();
  const bool has_own =
      !own.empty() && (fs::exists(own / "vocab.json") || fs::exists(own / "encoder.json"));
  const Tokenizer tok = Tokenizer::load(has_own ? own : default_model_path());
  if (tok.vocab_size() > engine.config().vocab_size)
    throw Error("lookahead bench: the tokenizer's ids do not fit the model's vocabulary");
  const char* const kMethods[] = {"lookahead", "prompt_lookup"};
  json rows = json::array();
  for (const Text& t : kTexts) {
    const std::vector<int> prompt = encode(tok, t.text);
    const int n = std::min(tokens, engine.config().n_ctx - static_cast<int>(prompt.size()) - 1);
    if (n < 1) continue;
    for (const char* method : kMethods) {
      const SamplingParams params = parse_strategy(method);
      // A B A B: plain greedy, then the method, three times each.
      std::vector<double> greedy_s, method_s;
      Outcome g, m;
      for (int rep = 0; rep < 3; ++rep) {
        g = run_greedy(engine, prompt, n, roofs);
        m = run_passes(engine, prompt, n, params, roofs);
        greedy_s.push_back(g.seconds);
        method_s.push_back(m.seconds);
      }
      const bool same = g.tokens == m.tokens;
      identical = identical && same;
      const double tg = median(greedy_s) / n, tm = median(method_s) / n;
      rows.push_back({{"text", t.kind},
                      {"method", describe(params)},
                      {"tokens", n},
                      {"greedy_ms_per_token", tg * 1e3},
                      {"ms_per_token", tm * 1e3},
                      {"speedup", tg / tm},
                      {"predicted_speedup", g.predicted_seconds / m.predicted_seconds},
                      {"passes", m.passes},
                      {"tokens_per_pass", static_cast<double>(n) / m.passes},
                      {"fed_tokens_per_pass", static_cast<double>(m.fed) / m.passes},
                      {"outputs_identical", same}});
      std::cerr << "lookahead bench: " << t.kind << ", " << method << ": "
                << static_cast<double>(n) / m.passes << " tokens per pass, speed-up " << tg / tm
                << " (predicted " << g.predicted_seconds / m.predicted_seconds << ")"
                << (same ? "" : ", OUTPUT DIFFERS FROM GREEDY") << "\n";
    }
  }
  return {{"tokens", tokens},
          {"tokenizer", has_own ? "the model's" : "the bundled model's (the model has none)"},
          {"prediction",
           "the cost model's FLOPs and bytes of each pass on the measured roofs, greedy's steps "
           "against the method's passes"},
          {"runs", rows}};
}

}  // namespace ts::bench
