#include <algorithm>
#include <cmath>

#include "session/session_import_reader.h"

// The step records of the lane kinds, read back and checked against the
// session's shape: each a one-line error naming the field's place.

namespace ts::session_import {

namespace {

BeamSearchState read_beam_state(const Reader& r, const json& j, const std::string& w,
                                const Shape& s) {
  BeamSearchState st;
  const int vocab = s.config.vocab_size;
  const size_t n_ctx = static_cast<size_t>(s.config.n_ctx);
  const json& beams = r.array(j, w, "beams", 64);
  for (size_t i = 0; i < beams.size(); ++i) {
    const std::string bw = at(w + ".beams", i);
    Beam b;
    b.tokens = r.ints(beams[i], bw, "tokens", n_ctx, 0, vocab - 1);
    b.token_log_probs = r.floats(beams[i], bw, "token_log_probs", n_ctx);
    b.sum_log_prob = r.number(beams[i], bw, "sum");
    st.beams.push_back(std::move(b));
  }
  const json& fin = r.array(j, w, "finished", 64);
  for (size_t i = 0; i < fin.size(); ++i) {
    const std::string hw = at(w + ".finished", i);
    BeamHypothesis h;
    h.tokens = r.ints(fin[i], hw, "tokens", n_ctx, 0, vocab - 1);
    h.token_log_probs = r.floats(fin[i], hw, "token_log_probs", n_ctx + 1);
    h.sum_log_prob = r.number(fin[i], hw, "sum");
    h.score = r.number(fin[i], hw, "score");
    h.ended_by_eos = r.boolean(fin[i], hw, "eos");
    h.generated_len = r.integer(fin[i], hw, "len", 0, s.config.n_ctx + 1);
    st.finished.push_back(std::move(h));
  }
  st.worst_finished_score = r.number(j, w, "worst");
  st.done = r.boolean(j, w, "done");
  st.steps = r.integer(j, w, "steps", 0, s.config.n_ctx);
  return st;
}

}  // namespace

std::shared_ptr<const BeamStep> read_beam(const Reader& r, const json& j, const std::string& w,
                                          const Shape& s) {
  auto b = std::make_shared<BeamStep>();
  const json& before = r.field(j, w, "before");
  const json& after = r.field(j, w, "after");
  if (before.is_null() || after.is_null()) r.fail(w, "a beam step needs \"before\" and \"after\"");
  b->before = std::make_shared<const BeamSearchState>(read_beam_state(r, before, w + ".before", s));
  b->after = std::make_shared<const BeamSearchState>(read_beam_state(r, after, w + ".after", s));
  const int n_before = static_cast<int>(b->before->beams.size());
  const int n_after = static_cast<int>(b->after->beams.size());
  const json& cands = r.array(j, w, "candidates", 128);
  for (size_t i = 0; i < cands.size(); ++i) {
    const std::string cw = at(w + ".candidates", i);
    BeamCandidate c;
    c.parent = r.integer(cands[i], cw, "parent", 0, std::max(0, n_before - 1));
    if (n_before == 0) r.fail(cw, "a candidate with no beam before the step");
    c.token = r.integer(cands[i], cw, "token", 0, s.config.vocab_size - 1);
    c.log_prob = static_cast<float>(r.number(cands[i], cw, "log_prob"));
    c.sum_log_prob = r.number(cands[i], cw, "sum");
    c.fate = static_cast<CandidateFate>(r.integer(cands[i], cw, "fate", 0, 2));
    c.new_beam = r.integer(cands[i], cw, "new_beam", -1, n_after - 1);
    b->candidates.push_back(c);
  }
  json wrapped = {{"beams", json::array()},
                  {"finished", r.field(j, w, "final")},
                  {"worst", 0},
                  {"done", false},
                  {"steps", 0}};
  b->final = read_beam_state(r, wrapped, w, s).finished;
  return b;
}

std::shared_ptr<const ContrastiveStep> read_contrastive(const Reader& r, const json& j,
                                                        const std::string& w, const Shape& s,
                                                        int context) {
  auto c = std::make_shared<ContrastiveStep>();
  const json& cands = r.array(j, w, "candidates", 64);
  if (cands.empty()) r.fail(w, "no candidates");
  c->k = r.integer(j, w, "k", 1, 64);
  c->alpha = static_cast<float>(r.number(j, w, "alpha"));
  c->chosen = r.integer(j, w, "chosen", 0, static_cast<int>(cands.size()) - 1);
  c->positions = r.integer(j, w, "positions", 0, context);
  for (size_t i = 0; i < cands.size(); ++i) {
    const std::string cw = at(w + ".candidates", i);
    ContrastiveCandidate k;
    k.token = r.integer(cands[i], cw, "token", 0, s.config.vocab_size - 1);
    k.prob = static_cast<float>(r.number(cands[i], cw, "prob"));
    k.penalty = static_cast<float>(r.number(cands[i], cw, "penalty"));
    k.similar_pos = r.integer(cands[i], cw, "similar_pos", 0, std::max(0, context - 1));
    k.score = static_cast<float>(r.number(cands[i], cw, "score"));
    c->candidates.push_back(k);
  }
  c->similarity = r.packed(r.field(j, w, "similarity"), w + ".similarity",
                           cands.size() * static_cast<size_t>(c->positions), false);
  return c;
}

namespace {

StepCost read_cost(const Reader& r, const json& j, const std::string& w) {
  StepCost c;
  c.flops = r.number(j, w, "flops");
  c.weight_bytes = r.number(j, w, "weight_bytes");
  c.kv_read_bytes = r.number(j, w, "kv_read_bytes");
  c.kv_write_bytes = r.number(j, w, "kv_write_bytes");
  return c;
}

// `count` rows of `width` float32 values each.
std::vector<std::vector<float>> read_rows(const Reader& r, const json& j, const std::string& w,
                                          const char* key, size_t count, size_t width) {
  const json& a = r.array(j, w, key, count);
  if (a.size() != count)
    r.fail(w + "." + key, std::to_string(a.size()) + " rows, expected " + std::to_string(count));
  std::vector<std::vector<float>> rows;
  for (size_t i = 0; i < a.size(); ++i) {
    rows.push_back(r.packed(a[i], at(w + "." + key, i), width, false));
    for (float v : rows.back())
      if (!std::isfinite(v)) r.fail(at(w + "." + key, i), "a logit is not a finite number");
  }
  return rows;
}

}  // namespace

// A speculative round; `rows` is the record's verify pass (its input tokens).
std::shared_ptr<const SpecRound> read_spec(const Reader& r, const json& j, const std::string& w,
                                           const Shape& s, int rows) {
  const int vocab = s.config.vocab_size;
  const int max_ctx = std::min(s.config.n_ctx, kMaxReplayContext);
  auto sr = std::make_shared<SpecRound>();
  sr->gamma_planned = r.integer(j, w, "gamma_planned", 0, kMaxSpecGamma);
  sr->gamma = r.integer(j, w, "gamma", 0, kMaxSpecGamma);
  if (sr->gamma + 1 != rows)
    r.fail(w + ".gamma", std::to_string(sr->gamma) + " drafts, but the verify pass fed " +
                             std::to_string(rows) + " tokens");
  sr->clamp_reason = r.string(j, w, "clamp_reason");
  sr->gamma_next = r.integer(j, w, "gamma_next", 0, kMaxSpecGamma);
  sr->sampled = r.boolean(j, w, "sampled");
  const json& drafts = r.array(j, w, "drafts", kMaxSpecGamma);
  if (static_cast<int>(drafts.size()) != sr->gamma)
    r.fail(w + ".drafts",
           std::to_string(drafts.size()) + " entries for gamma " + std::to_string(sr->gamma));
  for (size_t i = 0; i < drafts.size(); ++i) {
    const std::string dw = at(w + ".drafts", i);
    SpecDraftToken d;
    d.token = r.integer(drafts[i], dw, "token", 0, vocab - 1);
    d.q = static_cast<float>(r.number(drafts[i], dw, "q"));
    d.p = static_cast<float>(r.number(drafts[i], dw, "p"));
    d.ratio = r.number(drafts[i], dw, "ratio");
    d.uniform = r.number(drafts[i], dw, "uniform");
    d.target_choice = r.integer(drafts[i], dw, "target_choice", -1, vocab - 1);
    d.checked = r.boolean(drafts[i], dw, "checked");
    d.accepted = r.boolean(drafts[i], dw, "accepted");
    sr->drafts.push_back(d);
  }
  const size_t width = static_cast<size_t>(vocab);
  sr->draft_logits = read_rows(r, j, w, "draft_logits", drafts.size(), width);
  sr->target_logits = read_rows(r, j, w, "target_logits", drafts.size() + 1, width);
  sr->accepted = r.integer(j, w, "accepted", 0, sr->gamma);
  sr->next_token = r.integer(j, w, "next_token", -1, vocab - 1);
  sr->next = static_cast<SpecNext>(r.integer(j, w, "next", 0, 1));
  sr->next_uniform = r.number(j, w, "next_uniform");
  const json& residual = r.field(j, w, "residual");
  if (!residual.is_string()) r.fail(w + ".residual", "expected a base64 string");
  if (!residual.get_ref<const std::string&>().empty())
    sr->residual = r.packed(residual, w + ".residual", width, false);
  sr->residual_fallback = r.boolean(j, w, "residual_fallback");
  sr->committed = r.ints(j, w, "committed", static_cast<size_t>(sr->gamma) + 1, 0, vocab - 1);
  if (sr->committed.empty()) r.fail(w + ".committed", "a round that committed no token");
  sr->first_index = r.integer(j, w, "first_index", 0, s.config.n_ctx);
  sr->target_before = r.integer(j, w, "target_before", 0, max_ctx);
  sr->target_after = r.integer(j, w, "target_after", 0, max_ctx);
  sr->draft_before = r.integer(j, w, "draft_before", 0, max_ctx);
  sr->draft_after = r.integer(j, w, "draft_after", 0, max_ctx);
  const int big = std::numeric_limits<int>::max();
  sr->target_slots_released =
      r.ints(j, w, "target_slots_released", static_cast<size_t>(kMaxSpecGamma) + 2, 0, big);
  sr->draft_slots_released =
      r.ints(j, w, "draft_slots_released", static_cast<size_t>(kMaxSpecGamma) + 2, 0, big);
  sr->target_blocks_freed = r.integer(j, w, "target_blocks_freed", 0, max_ctx);
  sr->draft_blocks_freed = r.integer(j, w, "draft_blocks_freed", 0, max_ctx);
  sr->draft_passes = r.integer(j, w, "draft_passes", 0, kMaxSpecGamma + 1);
  sr->draft_tokens_fed = r.integer(j, w, "draft_tokens_fed", 0, 2 * (kMaxSpecGamma + 1));
  sr->draft_seconds = r.number(j, w, "draft_seconds");
  sr->draft_cost = read_cost(r, r.field(j, w, "draft_cost"), w + ".draft_cost");
  sr->verify_seconds = r.number(j, w, "verify_seconds");
  sr->verify_cost = read_cost(r, r.field(j, w, "verify_cost"), w + ".verify_cost");
  return sr;
}

std::shared_ptr<const DolaStep> read_dola(const Reader& r, const json& j, const std::string& w,
                                          const Shape& s) {
  const int vocab = s.config.vocab_size;
  auto d = std::make_shared<DolaStep>();
  d->candidate_layers =
      r.ints(j, w, "candidate_layers", static_cast<size_t>(kMaxReplayLayers), 0, kMaxReplayLayers);
  if (d->candidate_layers.empty()) r.fail(w + ".candidate_layers", "empty");
  d->divergence = r.floats(j, w, "divergence", d->candidate_layers.size());
  if (d->divergence.size() != d->candidate_layers.size())
    r.fail(w + ".divergence", std::to_string(d->divergence.size()) + " entries for " +
                                  std::to_string(d->candidate_layers.size()) + " layers");
  d->premature_layer = r.integer(j, w, "premature_layer", 0, kMaxReplayLayers);
  if (std::find(d->candidate_layers.begin(), d->candidate_layers.end(), d->premature_layer) ==
      d->candidate_layers.end())
    r.fail(w + ".premature_layer", "not one of the candidate layers");
  d->kept = r.integer(j, w, "kept", 0, vocab);
  const json& top = r.array(j, w, "top", static_cast<size_t>(vocab));
  for (size_t i = 0; i < top.size(); ++i) {
    const std::string tw = at(w + ".top", i);
    DolaToken t;
    t.token = r.integer(top[i], tw, "token", 0, vocab - 1);
    t.final_logp = static_cast<float>(r.number(top[i], tw, "final_logp"));
    t.premature_logp = static_cast<float>(r.number(top[i], tw, "premature_logp"));
    t.contrast = static_cast<float>(r.number(top[i], tw, "contrast"));
    t.final_rank = r.integer(top[i], tw, "final_rank", 0, vocab - 1);
    d->top.push_back(t);
  }
  d->contrast =
      r.packed(r.field(j, w, "contrast"), w + ".contrast", static_cast<size_t>(vocab), false);
  // Finite scores, or -inf where the relative-top filter removed the token;
  // at least one token kept.
  bool any = false;
  for (size_t i = 0; i < d->contrast.size(); ++i) {
    const float v = d->contrast[i];
    if (std::isfinite(v))
      any = true;
    else if (!(std::isinf(v) && v < 0))
      r.fail(w + ".contrast", "value " + std::to_string(i) + " is neither a number nor -inf");
  }
  if (!any) r.fail(w + ".contrast", "no token kept");
  return d;
}

namespace {

// A string of '0' and '1' (a mask written by session_export's bits()).
std::vector<uint8_t> read_bits(const Reader& r, const json& j, const std::string& w,
                               const char* key, size_t count) {
  const std::string& text = r.string(j, w, key);
  if (text.size() != count)
    r.fail(w + "." + key,
           std::to_string(text.size()) + " entries, expected " + std::to_string(count));
  std::vector<uint8_t> out(count);
  for (size_t i = 0; i < count; ++i) {
    if (text[i] != '0' && text[i] != '1')
      r.fail(w + "." + key, "entry " + std::to_string(i) + " is neither 0 nor 1");
    out[i] = text[i] == '1';
  }
  return out;
}

}  // namespace

// A lookahead or prompt-lookup pass; `ls` is its record as read so far (its
// inputs are the pass's fed rows, its context the last committed token's).
std::shared_ptr<const LookaheadPass> read_lookahead(const Reader& r, const json& j,
                                                    const std::string& w, const Shape& s,
                                                    const LaneStep& ls) {
  const int vocab = s.config.vocab_size;
  const int big = std::numeric_limits<int>::max();
  auto p = std::make_shared<LookaheadPass>();
  p->prompt_lookup = r.boolean(j, w, "prompt_lookup");
  if (p->prompt_lookup != ls.params.prompt_lookup_on)
    r.fail(w + ".prompt_lookup", "does not match the strategy");
  p->start_pos = r.integer(j, w, "start_pos", ls.start_pos, ls.start_pos);
  p->first_index = r.integer(j, w, "first_index", 0, s.config.n_ctx);

  // What the pass fed: the record's inputs, each at a position after x's
  // and seeing only fed rows.
  const std::string lw = w + ".layout";
  const json& lj = r.field(j, w, "layout");
  LookaheadPassLayout& l = p->layout;
  const size_t n = ls.input_tokens.size();
  l.tokens = r.ints(lj, lw, "tokens", n, 0, vocab - 1);
  if (l.tokens != ls.input_tokens) r.fail(lw + ".tokens", "not the record's input tokens");
  l.positions = r.ints(lj, lw, "positions", n, ls.start_pos, s.config.n_ctx - 1);
  if (l.positions.size() != n)
    r.fail(lw + ".positions",
           std::to_string(l.positions.size()) + " entries for " + std::to_string(n) + " rows");
  l.mask = read_bits(r, lj, lw, "mask", n * n);
  const json& cands = r.array(lj, lw, "candidates", n);
  l.candidate_row = r.ints(lj, lw, "candidate_row", n, 1, static_cast<int>(n) - 1);
  if (l.candidate_row.size() != cands.size())
    r.fail(lw + ".candidate_row", std::to_string(l.candidate_row.size()) + " entries for " +
                                      std::to_string(cands.size()) + " candidates");
  for (size_t g = 0; g < cands.size(); ++g) {
    const json wrapped = {{"c", cands[g]}};
    l.candidates.push_back(r.ints(wrapped, at(lw + ".candidates", g), "c", n, 0, vocab - 1));
    if (l.candidates.back().empty() || l.candidate_row[g] + l.candidates.back().size() > n)
      r.fail(at(lw + ".candidates", g), "does not fit the fed rows");
  }
  l.window_row = r.integer(lj, lw, "window_row", -1, static_cast<int>(n) - 1);
  l.window_rows = r.integer(lj, lw, "window_rows", 0, kMaxLookaheadNgram - 1);
  l.window_cols = r.integer(lj, lw, "window_cols", 0, kMaxLookaheadWindow);
  if (l.window_row >= 0 &&
      static_cast<size_t>(l.window_row) + static_cast<size_t>(l.window_rows) * l.window_cols > n)
    r.fail(lw + ".window_row", "the window does not fit the fed rows");

  // The verdict: one verified row per decided token.
  const std::string vw = w + ".verdict";
  const json& vj = r.field(j, w, "verdict");
  LookaheadVerdict& v = p->verdict;
  v.committed = r.ints(vj, vw, "committed", n, 0, vocab - 1);
  if (v.committed.empty()) r.fail(vw + ".committed", "a pass that decided no token");
  v.matched = r.integer(vj, vw, "matched", 0, static_cast<int>(v.committed.size()) - 1);
  v.candidate = r.integer(vj, vw, "candidate", -1, static_cast<int>(l.candidates.size()) - 1);
  if ((v.candidate < 0) != (v.matched == 0))
    r.fail(vw + ".candidate", "does not match " + std::to_string(v.matched) + " accepted tokens");
  v.kept_rows = r.ints(vj, vw, "kept_rows", n, 0, static_cast<int>(n) - 1);
  if (v.kept_rows.size() != static_cast<size_t>(v.matched) + 1)
    r.fail(vw + ".kept_rows", std::to_string(v.kept_rows.size()) + " rows for " +
                                  std::to_string(v.matched) + " accepted tokens");
  const json& tried = r.array(vj, vw, "tried", n);
  const json& uniforms = r.array(vj, vw, "uniforms", n);
  const size_t depths = ls.params.do_sample ? v.committed.size() : 0;
  if (tried.size() != depths || uniforms.size() != depths)
    r.fail(vw + ".tried", std::to_string(tried.size()) + " and " + std::to_string(uniforms.size()) +
                              " depths tried, expected " + std::to_string(depths));
  for (size_t k = 0; k < depths; ++k) {
    const json wrapped = {{"t", tried[k]}, {"u", uniforms[k]}};
    v.tried.push_back(r.ints(wrapped, at(vw + ".tried", k), "t", n + 1, 0, vocab - 1));
    const json& u = r.array(wrapped, at(vw + ".uniforms", k), "u", n + 1);
    std::vector<double> row;
    for (size_t i = 0; i < u.size(); ++i) {
      row.push_back(r.number(u[i], at(at(vw + ".uniforms", k), i)));
      if (!(row.back() >= 0 && row.back() < 1))
        r.fail(at(at(vw + ".uniforms", k), i), "not in [0, 1)");
    }
    v.uniforms.push_back(std::move(row));
  }
  p->committed = r.ints(j, w, "committed", v.committed.size(), 0, vocab - 1);
  if (p->committed.empty() ||
      !std::equal(p->committed.begin(), p->committed.end(), v.committed.begin()))
    r.fail(w + ".committed", "not a beginning of the verdict's tokens");
  const size_t m = p->committed.size();
  // The record is the last committed token's: its context holds x's and the
  // tokens committed before it.
  if (ls.chosen_token != p->committed.back())
    r.fail(w + ".committed", "the record's chosen token is not the last committed one");
  if (ls.step_index != p->first_index + static_cast<int>(m) - 1)
    r.fail(w + ".first_index", "does not match the record's step index");
  if (ls.context_ids.size() != static_cast<size_t>(ls.start_pos) + m ||
      ls.context_ids[static_cast<size_t>(ls.start_pos)] != l.tokens[0] ||
      !std::equal(p->committed.begin(), p->committed.end() - 1,
                  ls.context_ids.begin() + ls.start_pos + 1))
    r.fail(w + ".committed", "the record's context is not x's and the committed tokens");

  const std::string ww = w + ".window";
  const json& wj = r.field(j, w, "window");
  p->window.rows = r.integer(wj, ww, "rows", 0, kMaxLookaheadNgram - 1);
  p->window.cols = r.integer(wj, ww, "cols", 0, kMaxLookaheadWindow);
  const size_t cells = static_cast<size_t>(p->window.rows) * p->window.cols;
  if (p->prompt_lookup && cells) r.fail(ww, "a prompt-lookup pass has no window");
  p->window.tokens = r.ints(wj, ww, "tokens", cells, 0, vocab - 1);
  if (p->window.tokens.size() != cells)
    r.fail(ww + ".tokens",
           std::to_string(p->window.tokens.size()) + " cells, expected " + std::to_string(cells));
  if (!r.string(wj, ww, "changed").empty())
    p->window.changed = read_bits(r, wj, ww, "changed", cells);
  p->window_outputs =
      r.ints(j, w, "window_outputs", static_cast<size_t>(kMaxLookaheadWindow), 0, vocab - 1);
  if (!p->window_outputs.empty() && static_cast<int>(p->window_outputs.size()) != p->window.cols)
    r.fail(w + ".window_outputs", std::to_string(p->window_outputs.size()) + " guesses for " +
                                      std::to_string(p->window.cols) + " columns");
  p->pool_size = r.integer(j, w, "pool_size", 0, big);
  p->new_ngrams = r.integer(j, w, "new_ngrams", 0, kMaxLookaheadWindow);
  p->slots = r.ints(j, w, "slots", n, 0, big);

  const size_t width = static_cast<size_t>(vocab);
  p->logits = read_rows(r, j, w, "logits", v.committed.size(), width);
  p->probs.clear();
  const json& probs = r.array(j, w, "probs", v.committed.size());
  if (probs.size() != v.committed.size())
    r.fail(w + ".probs",
           std::to_string(probs.size()) + " rows, expected " + std::to_string(v.committed.size()));
  for (size_t i = 0; i < probs.size(); ++i) {
    p->probs.push_back(r.packed(probs[i], at(w + ".probs", i), width, false));
    for (float x : p->probs.back())
      if (!(x >= 0.0f && x <= 1.0f)) r.fail(at(w + ".probs", i), "a probability outside [0, 1]");
  }
  if (ls.logits != p->logits[m - 1])
    r.fail(w + ".logits", "the record's logits are not its last committed token's row");
  p->seconds = r.number(j, w, "seconds");
  p->cost = read_cost(r, r.field(j, w, "cost"), w + ".cost");
  return p;
}

}  // namespace ts::session_import
