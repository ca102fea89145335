#include "session/cache_comparison.h"

#include <algorithm>
#include <cmath>

#include "sampling/sampling_pipeline.h"
#include "session/dola_lane.h"
#include "util/error.h"

namespace ts {

double CacheRun::seconds() const {
  double s = 0;
  for (const CacheRunStep& st : steps) s += st.seconds;
  return s;
}

double CacheRun::flops() const {
  double s = 0;
  for (const CacheRunStep& st : steps) s += st.cost.flops;
  return s;
}

double CacheRun::bytes() const {
  double s = 0;
  for (const CacheRunStep& st : steps) s += st.cost.bytes();
  return s;
}

namespace {

// The token the strategy picks from one forward pass's output. A DoLa
// strategy picks from the layer contrast of the pass's residual rows, as its
// lane does (dola_for_record), not from the final logits.
int choose(const Engine& engine, const EntryOutput& out, const std::vector<int>& context,
           const SamplingParams& params, int step_index) {
  if (params.dola()) {
    const auto d = dola_for_record(engine.weights(), params, out.logits, out.residuals);
    return sample_next(d->contrast, context, params, step_index).draw.chosen_token;
  }
  return sample_next(out.logits, context, params, step_index).draw.chosen_token;
}

}  // namespace

CacheComparison compare_kv_cache(Engine& engine, const std::vector<int>& prompt,
                                 const SamplingParams& params, int new_tokens) {
  if (prompt.empty()) throw Error("cache comparison: the prompt is empty");
  if (new_tokens < 1) throw Error("cache comparison: generate at least one token");
  params.validate();
  const int n_ctx = engine.config().n_ctx;
  if (static_cast<int>(prompt.size()) > n_ctx)
    throw Error("cache comparison: the prompt is longer than the model's context");
  CacheComparison out;
  out.prompt = prompt;
  out.params = params;
  // Steps: the prefill chooses token 1; each decode step feeds the newest
  // token and chooses the next. The sequence may not outgrow the context.
  const int steps = std::min(new_tokens, n_ctx - static_cast<int>(prompt.size()) + 1);
  std::vector<std::vector<float>> logits_on;
  // No attention: only the forward pass is timed. The residual rows only for
  // a DoLa strategy, whose choice needs them.
  ForwardOptions quiet;
  quiet.record_residuals = params.dola();
  if (params.dola()) dola_layers_for(params, engine.config());  // one line for a bad layer

  // With the cache: one sequence that grows by one token per step.
  {
    std::vector<int> seq = prompt;
    const SeqId id = engine.cache().create();
    try {
      for (int s = 0; s < steps; ++s) {
        const int cached = engine.cache().length(id);
        std::vector<int> feed(seq.begin() + cached, seq.end());
        ForwardResult r = engine.forward({{id, feed}}, quiet);
        CacheRunStep st{static_cast<int>(seq.size()), static_cast<int>(feed.size()), r.seconds,
                        r.cost, choose(engine, r.outputs[0], seq, params, s)};
        logits_on.push_back(std::move(r.outputs[0].logits));
        seq.push_back(st.chosen);
        out.on.steps.push_back(st);
      }
    } catch (...) {
      engine.cache().release(id);
      throw;
    }
    engine.cache().release(id);
  }
  // Without it: the whole sequence through a scratch sequence, every step.
  // It follows its own choices, so a difference would show as a new token.
  std::vector<int> seq = prompt;
  for (int s = 0; s < steps; ++s) {
    ForwardResult r = engine.forward_uncached(seq, quiet);
    const std::vector<float>& logits = r.outputs[0].logits;
    CacheRunStep st{static_cast<int>(seq.size()), static_cast<int>(seq.size()), r.seconds, r.cost,
                    choose(engine, r.outputs[0], seq, params, s)};
    for (size_t j = 0; j < logits.size(); ++j)
      out.max_abs_logit_diff = std::max(
          out.max_abs_logit_diff, static_cast<double>(std::fabs(logits[j] - logits_on[s][j])));
    if (st.chosen != out.on.steps[s].chosen && out.first_difference < 0) out.first_difference = s;
    seq.push_back(st.chosen);
    out.off.steps.push_back(st);
  }
  out.same_tokens = out.first_difference < 0;
  return out;
}

nlohmann::json cache_comparison_to_json(const CacheComparison& c) {
  auto run_json = [](const CacheRun& run) {
    nlohmann::json steps = nlohmann::json::array();
    for (const CacheRunStep& s : run.steps)
      steps.push_back({{"context", s.context},
                       {"tokens_run", s.tokens_run},
                       {"seconds", s.seconds},
                       {"flops", s.cost.flops},
                       {"bytes", s.cost.bytes()},
                       {"chosen", s.chosen}});
    return nlohmann::json{{"seconds", run.seconds()},
                          {"flops", run.flops()},
                          {"bytes", run.bytes()},
                          {"steps", steps}};
  };
  const double on_s = c.on.seconds(), on_f = c.on.flops();
  return {{"prompt_tokens", c.prompt.size()},
          {"steps", c.steps()},
          {"strategy", format_strategy(c.params)},
          {"cache_on", run_json(c.on)},
          {"cache_off", run_json(c.off)},
          {"same_tokens", c.same_tokens},
          {"first_difference", c.first_difference},
          {"max_abs_logit_diff", c.max_abs_logit_diff},
          {"time_ratio_off_over_on", on_s > 0 ? c.off.seconds() / on_s : 0.0},
          {"flop_ratio_off_over_on", on_f > 0 ? c.off.flops() / on_f : 0.0}};
}

}  // namespace ts
