#include "session/lookahead_lane.h"

#include <algorithm>

#include "sampling/sampling_pipeline.h"
#include "util/error.h"

namespace ts {
namespace {

std::vector<float> row_of(const std::vector<float>& logits, int r, int vocab) {
  return {logits.begin() + static_cast<long>(r) * vocab,
          logits.begin() + static_cast<long>(r + 1) * vocab};
}

// The raw argmax of one row, ties to the lower id: the window's next guess.
int raw_argmax(const std::vector<float>& logits, int r, int vocab) {
  const auto begin = logits.begin() + static_cast<long>(r) * vocab;
  return static_cast<int>(std::max_element(begin, begin + vocab) - begin);
}

}  // namespace

std::shared_ptr<const LookaheadState> initial_lookahead_state(const LookaheadConfig& config,
                                                              const std::vector<int>& context) {
  auto s = std::make_shared<LookaheadState>();
  s->window = initial_window(config, context);
  s->pool = NgramPool(config.ngram);
  return s;
}

LookaheadPass run_lookahead_pass(const LookaheadContext& ctx, SeqId seq,
                                 const std::vector<int>& tokens, int generated,
                                 const SamplingParams& params,
                                 const std::shared_ptr<const LookaheadState>& state) {
  Engine& engine = ctx.engine;
  const int vocab = engine.config().vocab_size;
  if (tokens.empty()) throw Error("lookahead: no tokens");
  LookaheadPass pass;
  pass.prompt_lookup = params.prompt_lookup_on;
  pass.start_pos = engine.cache().length(seq);
  if (pass.start_pos != static_cast<int>(tokens.size()) - 1)
    throw Error("lookahead: the sequence must cache every token but the last");

  std::vector<std::vector<int>> candidates;
  const LookaheadWindow* window = nullptr;
  if (pass.prompt_lookup) {
    std::vector<int> draft = prompt_lookup_draft(tokens, params.prompt_lookup);
    if (!draft.empty()) candidates.push_back(std::move(draft));
  } else {
    if (!state) throw Error("lookahead: the lane has no window");
    candidates = state->pool.candidates(tokens.back(), params.lookahead.verify);
    window = &state->window;
    pass.window = state->window;
    pass.pool_size = state->pool.size();
    pass.state_before = state;
  }
  pass.layout = lay_out_lookahead_pass(tokens.back(), pass.start_pos, window, std::move(candidates),
                                       engine.config().n_ctx);

  ForwardRequest req(seq, pass.layout.tokens);
  req.positions = pass.layout.positions;
  req.mask = pass.layout.mask;
  ForwardOptions opts = ctx.options;
  opts.all_logits = true;
  ForwardResult res = engine.forward({req}, opts);
  try {
    pass.seconds = res.seconds;
    pass.cost = res.cost;
    const std::vector<float>& logits = res.outputs[0].logits;
    // The context each fed row continues: x's, or x's plus its candidate's prefix.
    const auto row_context = [&](int r) {
      std::vector<int> c = tokens;
      for (size_t g = 0; g < pass.layout.candidates.size(); ++g) {
        const int first = pass.layout.candidate_row[g];
        const int len = static_cast<int>(pass.layout.candidates[g].size());
        if (r >= first && r < first + len)
          c.insert(c.end(), pass.layout.candidates[g].begin(),
                   pass.layout.candidates[g].begin() + (r - first + 1));
      }
      return c;
    };
    const auto row = [&](int r) {
      const std::vector<int> context = row_context(r);
      const int step = generated + static_cast<int>(context.size() - tokens.size());
      SamplingRecord rec =
          sample_next(row_of(logits, r, vocab), context, params, step, ctx.banned.get());
      pass.logits.push_back(row_of(logits, r, vocab));
      return RowChoice{std::move(rec.final_probs), params.do_sample ? -1 : rec.draw.chosen_token};
    };
    const auto uniform = [&](int k) { return lookahead_uniform(params.seed, generated, k); };
    pass.verdict = verify_lookahead(pass.layout, params.do_sample, row, uniform);

    if (!pass.prompt_lookup) {
      auto next = std::make_shared<LookaheadState>(*state);
      if (pass.layout.window_row >= 0) {
        const int last = pass.layout.window_row + (state->window.rows - 1) * state->window.cols;
        for (int c = 0; c < state->window.cols; ++c)
          pass.window_outputs.push_back(raw_argmax(logits, last + c, vocab));
        for (const auto& g : window_ngrams(state->window, pass.window_outputs))
          pass.new_ngrams += next->pool.add(g) ? 1 : 0;
        next->window = next_window(state->window, pass.window_outputs);
      }
      pass.state_after = std::move(next);
    }
    engine.keep_rows(seq, pass.start_pos, pass.verdict.kept_rows);
  } catch (...) {
    engine.cache().truncate(seq, pass.start_pos);
    throw;
  }
  return pass;
}

}  // namespace ts
