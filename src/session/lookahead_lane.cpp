#include "session/lookahead_lane.h"

#include <algorithm>

#include "sampling/distribution.h"
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
                                 const std::shared_ptr<const LookaheadState>& state,
                                 std::vector<std::vector<float>>* attention) {
  Engine& engine = ctx.engine;
  const int vocab = engine.config().vocab_size;
  if (tokens.empty()) throw Error("lookahead: no tokens");
  LookaheadPass pass;
  pass.prompt_lookup = params.prompt_lookup_on;
  pass.first_index = generated;
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
  pass.slots = res.plans[0].slots;
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
      pass.probs.push_back(rec.final_probs);
      return RowChoice{std::move(rec.final_probs), params.do_sample ? -1 : rec.draw.chosen_token};
    };
    const auto uniform = [&](int k) { return lookahead_uniform(params.seed, generated, k); };
    pass.verdict = verify_lookahead(pass.layout, params.do_sample, row, uniform);
    pass.committed = pass.verdict.committed;

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
    if (attention) *attention = std::move(res.outputs[0].attention);
  } catch (...) {
    engine.cache().truncate(seq, pass.start_pos);
    throw;
  }
  return pass;
}

LaneStep run_lookahead_step(const LookaheadLaneContext& ctx, const Lane& lane,
                            const std::vector<int>& tokens) {
  const SamplingParams& params = lane.params;
  const int generated = static_cast<int>(lane.generated.size());
  LookaheadContext lc{ctx.engine, ctx.banned, {}};
  lc.options.record_attention = ctx.record_attention;
  std::vector<std::vector<float>> attention;
  auto pass = std::make_shared<LookaheadPass>(run_lookahead_pass(
      lc, lane.seq, tokens, generated, params, lane.lookahead_state, &attention));
  // Committed: cut after an end of text and at the token limit (generation
  // stops there, as it would token by token); the cache keeps x and the
  // accepted tokens before the last committed one.
  std::vector<int>& committed = pass->committed;
  if (ctx.eot_id >= 0) {
    const auto eot = std::find(committed.begin(), committed.end(), ctx.eot_id);
    if (eot != committed.end()) committed.erase(eot + 1, committed.end());
  }
  if (ctx.max_new_tokens > 0 && generated + static_cast<int>(committed.size()) > ctx.max_new_tokens)
    committed.resize(static_cast<size_t>(std::max(1, ctx.max_new_tokens - generated)));
  const int m = static_cast<int>(committed.size());
  if (ctx.engine.cache().length(lane.seq) > pass->start_pos + m)
    ctx.engine.cache().truncate(lane.seq, pass->start_pos + m);

  LaneStep ls;
  ls.lane = lane.id;
  ls.input_tokens = pass->layout.tokens;
  ls.start_pos = pass->start_pos;
  ls.slots_written = pass->slots;
  ls.context_ids = tokens;  // the last committed token's context
  ls.context_ids.insert(ls.context_ids.end(), committed.begin(), committed.end() - 1);
  ls.logits = pass->logits[m - 1];
  ls.entropy = entropy_nats(softmax(ls.logits));
  ls.attention.resize(attention.size());
  for (size_t l = 0; l < attention.size(); ++l)
    if (!attention[l].empty())
      ls.attention[l] = std::make_shared<const std::vector<float>>(std::move(attention[l]));
  ls.params = params;
  ls.step_index = generated + m - 1;
  ls.chosen_token = committed.back();
  const std::vector<float>& p = pass->probs[m - 1];
  ls.chosen_prob = p[ls.chosen_token];
  if (params.do_sample && m - 1 < static_cast<int>(pass->verdict.uniforms.size()) &&
      !pass->verdict.uniforms[m - 1].empty())
    ls.uniform = pass->verdict.uniforms[m - 1].back();
  ls.kept_tokens =
      static_cast<int>(std::count_if(p.begin(), p.end(), [](float x) { return x > 0.0f; }));
  ls.banned_words = ctx.banned;
  ls.lookahead = std::move(pass);
  return ls;
}

void commit_lookahead_step(Lane& lane, const LaneStep& record) {
  const LookaheadPass& p = *record.lookahead;
  lane.generated.insert(lane.generated.end(), p.committed.begin(), p.committed.end());
  if (p.state_after) lane.lookahead_state = p.state_after;
}

void uncommit_lookahead_step(Lane& lane, const LaneStep& record) {
  const LookaheadPass& p = *record.lookahead;
  lane.generated.resize(static_cast<size_t>(p.first_index));
  if (p.state_before) lane.lookahead_state = p.state_before;
}

}  // namespace ts
