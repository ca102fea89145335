#include "session/session_import.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "model/mapped_file.h"
#include "session/replay_codec.h"
#include "session/session_export.h"
#include "util/error.h"

namespace ts {

using nlohmann::json;

namespace {

// A field's place in the document ("steps[3].replay.lanes[0].logits") and
// the checked reads of it. Every read failure throws "FILE: PATH: reason".
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& why) const {
    throw Error(file_ + ": " + (where.empty() ? "" : where + ": ") + why);
  }

  const json& field(const json& obj, const std::string& where, const char* key) const {
    if (!obj.is_object()) fail(where, "expected an object");
    const auto it = obj.find(key);
    if (it == obj.end()) fail(where, std::string("missing \"") + key + "\"");
    return *it;
  }

  int64_t integer(const json& v, const std::string& where, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) fail(where, "expected an integer");
    int64_t x = 0;
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > uint64_t(std::numeric_limits<int64_t>::max())) fail(where, "out of range");
      x = static_cast<int64_t>(u);
    } else {
      x = v.get<int64_t>();
    }
    if (x < lo || x > hi)
      fail(where,
           std::to_string(x) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
    return x;
  }
  int integer(const json& obj, const std::string& where, const char* key, int lo, int hi) const {
    return static_cast<int>(integer(field(obj, where, key), where + "." + key, lo, hi));
  }
  uint64_t unsigned64(const json& obj, const std::string& where, const char* key) const {
    const json& v = field(obj, where, key);
    if (!v.is_number_unsigned()) fail(where + "." + key, "expected a non-negative integer");
    return v.get<uint64_t>();
  }
  // A number, or "inf" / "-inf" / "nan" (the export writes non-finite numbers as strings).
  double number(const json& v, const std::string& where) const {
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    }
    fail(where, "expected a number");
  }
  double number(const json& obj, const std::string& where, const char* key) const {
    return number(field(obj, where, key), where + "." + key);
  }
  bool boolean(const json& obj, const std::string& where, const char* key) const {
    const json& v = field(obj, where, key);
    if (!v.is_boolean()) fail(where + "." + key, "expected true or false");
    return v.get<bool>();
  }
  const std::string& string(const json& obj, const std::string& where, const char* key) const {
    const json& v = field(obj, where, key);
    if (!v.is_string()) fail(where + "." + key, "expected a string");
    return v.get_ref<const std::string&>();
  }
  const json& array(const json& v, const std::string& where, size_t max_size) const {
    if (!v.is_array()) fail(where, "expected an array");
    if (v.size() > max_size)
      fail(where, std::to_string(v.size()) + " entries, at most " + std::to_string(max_size));
    return v;
  }
  const json& array(const json& obj, const std::string& where, const char* key,
                    size_t max_size) const {
    return array(field(obj, where, key), where + "." + key, max_size);
  }
  std::vector<int> ints(const json& obj, const std::string& where, const char* key, size_t max_size,
                        int lo, int hi) const {
    const std::string w = where + "." + key;
    const json& a = array(obj, where, key, max_size);
    std::vector<int> out;
    out.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i)
      out.push_back(static_cast<int>(integer(a[i], w + "[" + std::to_string(i) + "]", lo, hi)));
    return out;
  }
  std::vector<float> floats(const json& obj, const std::string& where, const char* key,
                            size_t max_size) const {
    const std::string w = where + "." + key;
    const json& a = array(obj, where, key, max_size);
    std::vector<float> out;
    for (size_t i = 0; i < a.size(); ++i)
      out.push_back(static_cast<float>(number(a[i], w + "[" + std::to_string(i) + "]")));
    return out;
  }
  std::vector<float> packed(const json& v, const std::string& where, size_t count,
                            bool half) const {
    if (!v.is_string()) fail(where, "expected a base64 string");
    const std::string& text = v.get_ref<const std::string&>();
    auto values = half ? replay::unpack_f16(text, count) : replay::unpack_f32(text, count);
    if (!values)
      fail(where, "expected " + std::to_string(count) +
                      (half ? " half floats" : " float32 values") + " in base64 (" +
                      std::to_string(text.size()) + " characters)");
    return std::move(*values);
  }

 private:
  std::string file_;
};

std::string at(const std::string& where, size_t i) { return where + "[" + std::to_string(i) + "]"; }

struct Shape {
  ModelConfig config;
  int lanes = 0;
  int steps = 0;
};

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

LaneStep read_lane_step(const Reader& r, const json& j, const std::string& w, const Shape& s,
                        const std::vector<std::shared_ptr<const BannedTokens>>& lists) {
  const ModelConfig& cfg = s.config;
  const int vocab = cfg.vocab_size;
  const int max_ctx = std::min(cfg.n_ctx, kMaxReplayContext);
  LaneStep ls;
  ls.lane = r.integer(j, w, "lane", 0, s.lanes - 1);
  ls.input_tokens = r.ints(j, w, "input_tokens", max_ctx, 0, vocab - 1);
  if (ls.input_tokens.empty()) r.fail(w + ".input_tokens", "empty");
  ls.start_pos = r.integer(j, w, "start_pos", 0, max_ctx - 1);
  ls.context_ids = r.ints(j, w, "context_ids", max_ctx, 0, vocab - 1);
  ls.slots_written = r.ints(j, w, "slots_written", max_ctx, 0, std::numeric_limits<int>::max());
  ls.blocks_copied = r.integer(j, w, "blocks_copied", 0, max_ctx);
  try {
    ls.params = parse_strategy(r.string(j, w, "strategy"));
  } catch (const Error& e) {
    r.fail(w + ".strategy", e.what());
  }
  // A lookahead or prompt-lookup lane's prefill feeds the prompt only; each
  // later record is a pass, and one without it (a file written before passes
  // were stored) would replay as a single token.
  const bool pass = j.contains("lookahead");
  if (ls.params.draft_free() && !pass && ls.start_pos > 0)
    r.fail(w + ".strategy",
           "lookahead or prompt-lookup lane without its pass (written by an older TokenScope: "
           "export the session again to re-open it)");
  // A pass's context is its last committed token's (checked with the pass).
  if (!pass && static_cast<int>(ls.context_ids.size()) != ls.context())
    r.fail(w + ".context_ids", std::to_string(ls.context_ids.size()) +
                                   " tokens, but start_pos + input tokens is " +
                                   std::to_string(ls.context()));
  ls.step_index = r.integer(j, w, "step_index", 0, cfg.n_ctx);
  ls.chosen_token = r.integer(j, w, "chosen_token", -1, vocab - 1);
  ls.chosen_prob = static_cast<float>(r.number(j, w, "chosen_prob"));
  ls.uniform = r.number(j, w, "uniform");
  ls.kept_tokens = r.integer(j, w, "kept_tokens", 0, vocab);
  ls.entropy = r.number(j, w, "entropy");
  const int banned = r.integer(j, w, "banned_words", -1, static_cast<int>(lists.size()) - 1);
  if (banned >= 0) ls.banned_words = lists[banned];
  ls.logits = r.packed(r.field(j, w, "logits"), w + ".logits", static_cast<size_t>(vocab), false);
  // A model's raw logits are finite; the views sort and softmax them.
  for (size_t i = 0; i < ls.logits.size(); ++i)
    if (!std::isfinite(ls.logits[i]))
      r.fail(w + ".logits", "value " + std::to_string(i) + " is not a finite number");
  const json& layers = r.array(j, w, "attention", static_cast<size_t>(cfg.n_layer));
  if (!layers.empty() && static_cast<int>(layers.size()) != cfg.n_layer)
    r.fail(w + ".attention",
           std::to_string(layers.size()) + " layers, the model has " + std::to_string(cfg.n_layer));
  const size_t per_layer =
      static_cast<size_t>(cfg.n_head) * ls.input_tokens.size() * static_cast<size_t>(ls.context());
  for (size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].is_null()) {
      ls.attention.push_back(nullptr);
      continue;
    }
    std::vector<float> weights = r.packed(layers[l], at(w + ".attention", l), per_layer, true);
    // Softmax weights: in [0, 1] (NaN fails the test too).
    for (size_t i = 0; i < weights.size(); ++i)
      if (!(weights[i] >= 0.0f && weights[i] <= 1.0f))
        r.fail(at(w + ".attention", l), "weight " + std::to_string(i) + " is outside [0, 1]");
    ls.attention.push_back(std::make_shared<const std::vector<float>>(std::move(weights)));
  }
  if (j.contains("beam")) ls.beam = read_beam(r, j["beam"], w + ".beam", s);
  if (j.contains("contrastive"))
    ls.contrastive = read_contrastive(r, j["contrastive"], w + ".contrastive", s, ls.context());
  if (j.contains("spec")) ls.spec = read_spec(r, j["spec"], w + ".spec", s, ls.rows());
  if (j.contains("dola")) ls.dola = read_dola(r, j["dola"], w + ".dola", s);
  // Replaying a speculative round or a DoLa choice from the logits alone
  // would show the wrong choice, so a record without its round or step (a
  // file written before they were stored) is refused rather than misread. A
  // speculative lane's prefill (from position 0) and a one-row record (a
  // branch) were ordinary choices and replay from their logits.
  if (ls.params.speculative() && !ls.spec && ls.start_pos > 0 && ls.rows() > 1)
    r.fail(w + ".strategy",
           "speculative lane without its round (written by an older TokenScope: export the "
           "session again to re-open it)");
  if (ls.params.dola() && !ls.dola)
    r.fail(w + ".strategy",
           "DoLa lane without its layer contrast (written by an older TokenScope: export the "
           "session again to re-open it)");
  if (ls.spec && !ls.params.speculative())
    r.fail(w + ".spec", "the strategy is not speculative decoding");
  if (ls.dola && !ls.params.dola()) r.fail(w + ".dola", "the strategy is not DoLa");
  if (pass) {
    if (!ls.params.draft_free())
      r.fail(w + ".lookahead", "the strategy is not lookahead or prompt lookup");
    ls.lookahead = read_lookahead(r, j["lookahead"], w + ".lookahead", s, ls);
  }
  if (ls.beam && !ls.params.beam_search()) r.fail(w + ".beam", "the strategy is not beam search");
  if (ls.contrastive && !ls.params.contrastive())
    r.fail(w + ".contrastive", "the strategy is not contrastive search");
  return ls;
}

KvOccupancy read_kv(const Reader& r, const json& j, const std::string& w, const json& ref_counts) {
  constexpr int kMaxBlocks = 1 << 24;
  KvOccupancy kv;
  kv.blocks_total = r.integer(j, w, "blocks_total", 0, kMaxBlocks);
  kv.blocks_used = r.integer(j, w, "blocks_used", 0, kv.blocks_total);
  kv.blocks_shared = r.integer(j, w, "blocks_shared", 0, kv.blocks_total);
  kv.blocks_free = r.integer(j, w, "blocks_free", 0, kv.blocks_total);
  kv.block_size = r.integer(j, w, "block_size", 1, 1 << 16);
  kv.bytes_per_layer_used = r.integer(r.field(j, w, "bytes_per_layer_used"),
                                      w + ".bytes_per_layer_used", 0, int64_t(1) << 50);
  kv.bytes_per_layer_capacity = r.integer(r.field(j, w, "bytes_per_layer_capacity"),
                                          w + ".bytes_per_layer_capacity", 0, int64_t(1) << 50);
  kv.wasted_slots = r.integer(j, w, "wasted_slots", 0, std::numeric_limits<int>::max());
  const json& seqs = r.array(j, w, "sequences", 4096);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::string sw = at(w + ".sequences", i);
    SequenceOccupancy so;
    so.id = r.integer(seqs[i], sw, "id", 0, std::numeric_limits<int>::max());
    so.tokens = r.integer(seqs[i], sw, "tokens", 0, kMaxReplayContext);
    so.block_table = r.ints(seqs[i], sw, "block_table", static_cast<size_t>(kv.blocks_total), 0,
                            std::max(0, kv.blocks_total - 1));
    so.wasted_slots = r.integer(seqs[i], sw, "wasted_slots", 0, kv.block_size);
    kv.sequences.push_back(std::move(so));
  }
  const json wrapped = {{"ref_counts", ref_counts}};
  kv.ref_counts = r.ints(wrapped, w, "ref_counts", static_cast<size_t>(kv.blocks_total), 0,
                         kMaxReplayLanes * 64);
  if (static_cast<int>(kv.ref_counts.size()) != kv.blocks_total)
    r.fail(w + ".ref_counts", std::to_string(kv.ref_counts.size()) + " entries for " +
                                  std::to_string(kv.blocks_total) + " blocks");
  return kv;
}

// Throws when the nesting is too deep or the document holds too many values:
// bounds what parsing can allocate, whatever the file declares.
json parse_bounded(std::string_view text, const std::string& name) {
  int64_t values = 0;
  const auto callback = [&](int depth, json::parse_event_t event, json&) {
    if (depth > kMaxSessionJsonDepth)
      throw Error(name + ": nested more than " + std::to_string(kMaxSessionJsonDepth) +
                  " levels deep: not a session file");
    if (event == json::parse_event_t::value && ++values > kMaxSessionJsonValues)
      throw Error(name + ": more than " + std::to_string(kMaxSessionJsonValues) +
                  " JSON values: too large for a session file");
    return true;
  };
  try {
    return json::parse(text, callback);
  } catch (const json::exception& e) {
    std::string what = e.what();
    const size_t tag_end = what.find("] ");
    if (tag_end != std::string::npos) what = what.substr(tag_end + 2);
    throw Error(name + ": not a complete JSON document (truncated or corrupt): " + what);
  }
}

std::shared_ptr<const Tokenizer> read_vocabulary(const Reader& r, const json& replay,
                                                 const std::string& name, int vocab_size) {
  const json& words = r.array(replay, "replay", "vocabulary", static_cast<size_t>(vocab_size));
  if (static_cast<int>(words.size()) != vocab_size)
    r.fail("replay.vocabulary",
           std::to_string(words.size()) + " tokens, the model has " + std::to_string(vocab_size));
  json vocab = json::object();
  for (size_t i = 0; i < words.size(); ++i) {
    if (!words[i].is_string()) r.fail(at("replay.vocabulary", i), "expected a string");
    vocab[words[i].get<std::string>()] = i;
  }
  if (vocab.size() != words.size()) r.fail("replay.vocabulary", "a token appears twice");
  // from_text's errors name the field: "FILE: replay.vocabulary: ...".
  return std::make_shared<const Tokenizer>(Tokenizer::from_text(
      vocab.dump(), "#version: 0.2\n", name + ": replay.vocabulary", name + ": (no merges)"));
}

}  // namespace

ImportedSession import_session_text(std::string_view text, const std::string& name) {
  const Reader r(name);
  const json doc = parse_bounded(text, name);
  if (!doc.is_object()) r.fail("", "not a TokenScope session file (expected a JSON object)");
  const auto format = doc.find("format");
  if (format == doc.end() || !format->is_string())
    r.fail("", "not a TokenScope session file (no \"format\")");
  const std::string& fmt = format->get_ref<const std::string&>();
  if (fmt != kSessionFormat) {
    if (fmt.rfind("tokenscope-session/", 0) == 0)
      r.fail("", "format " + fmt + ", this TokenScope reads " + kSessionFormat +
                     " (export the session again with this version)");
    r.fail("", "not a TokenScope session file (format \"" + fmt.substr(0, 64) + "\")");
  }

  ImportedSession out;
  out.file = name;
  SessionSnapshot& snap = out.full;
  Shape shape;
  ModelConfig& cfg = shape.config;
  const json& model = r.field(doc, "", "model");
  cfg.vocab_size = r.integer(model, "model", "vocab_size", 1, 1 << 20);
  cfg.n_ctx = r.integer(model, "model", "n_ctx", 1, 1 << 24);
  cfg.n_embd = r.integer(model, "model", "n_embd", 1, 1 << 16);
  cfg.n_head = r.integer(model, "model", "n_head", 1, kMaxReplayHeads);
  cfg.n_layer = r.integer(model, "model", "n_layer", 1, kMaxReplayLayers);
  snap.config = cfg;
  snap.model_name = r.string(model, "model", "source");
  snap.backend = r.string(doc, "", "backend");
  snap.device = r.string(doc, "", "device");
  snap.kv_cache = r.boolean(doc, "", "kv_cache");
  snap.prompt_text = r.string(doc, "", "prompt");
  const json& replay = r.field(doc, "", "replay");
  snap.max_new_tokens = r.integer(replay, "replay", "max_new_tokens", 0, cfg.n_ctx);
  snap.tokenizer = read_vocabulary(r, replay, name, cfg.vocab_size);

  const int max_ctx = std::min(cfg.n_ctx, kMaxReplayContext);
  const json& prompt = r.array(doc, "", "prompt_tokens", static_cast<size_t>(max_ctx));
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::string w = at("prompt_tokens", i);
    TokenSpan t{};
    t.id = r.integer(prompt[i], w, "id", 0, cfg.vocab_size - 1);
    t.byte_begin = static_cast<size_t>(
        r.integer(prompt[i], w, "byte_begin", 0, static_cast<int>(snap.prompt_text.size())));
    t.byte_end =
        static_cast<size_t>(r.integer(prompt[i], w, "byte_end", static_cast<int>(t.byte_begin),
                                      static_cast<int>(snap.prompt_text.size())));
    snap.prompt_tokens.push_back(t);
  }
  // The tokens must spell the prompt, span after span: a prompt edited in
  // the file would otherwise be shown while the records replay another one.
  size_t spelled = 0;
  for (size_t i = 0; i < snap.prompt_tokens.size(); ++i) {
    const TokenSpan& t = snap.prompt_tokens[i];
    const std::string bytes = snap.tokenizer->token_bytes(t.id);
    if (t.byte_begin != spelled ||
        snap.prompt_text.compare(t.byte_begin, t.byte_end - t.byte_begin, bytes) != 0)
      r.fail(at("prompt_tokens", i), "token " + std::to_string(t.id) +
                                         " does not match the prompt at byte " +
                                         std::to_string(spelled) + " (the prompt was changed?)");
    spelled = t.byte_end;
  }
  if (spelled != snap.prompt_text.size())
    r.fail("prompt_tokens", "the tokens spell " + std::to_string(spelled) + " of the prompt's " +
                                std::to_string(snap.prompt_text.size()) +
                                " bytes (the prompt was changed?)");

  const json& steps = r.array(doc, "", "steps", static_cast<size_t>(max_ctx) + 1);
  const json& lanes = r.array(doc, "", "lanes", kMaxReplayLanes);
  shape.lanes = static_cast<int>(lanes.size());
  shape.steps = static_cast<int>(steps.size());

  std::vector<std::shared_ptr<const BannedTokens>> lists;
  const json& banned = r.array(replay, "replay", "banned_words", 64);
  for (size_t i = 0; i < banned.size(); ++i) {
    const std::string w = at("replay.banned_words", i);
    auto b = std::make_shared<BannedTokens>();
    b->source = r.string(banned[i], w, "source");
    b->entries = r.integer(banned[i], w, "entries", 0, 1 << 20);
    const json& seqs = r.array(banned[i], w, "sequences", 1 << 20);
    for (size_t k = 0; k < seqs.size(); ++k) {
      const json wrapped = {{"s", seqs[k]}};
      std::vector<int> seq =
          r.ints(wrapped, at(w + ".sequences", k), "s", 64, 0, cfg.vocab_size - 1);
      if (seq.empty()) r.fail(at(w + ".sequences", k), "empty");
      b->sequences.push_back(std::move(seq));
    }
    std::sort(b->sequences.begin(), b->sequences.end());
    b->sequences.erase(std::unique(b->sequences.begin(), b->sequences.end()), b->sequences.end());
    for (const auto& seq : b->sequences) {
      if (seq.size() == 1)
        b->singles.push_back(seq[0]);
      else
        b->multi.push_back(seq);
    }
    std::sort(b->singles.begin(), b->singles.end());
    lists.push_back(std::move(b));
  }
  // The display masks the first list's single-token words, as it did live.
  if (!lists.empty()) snap.banned_words = lists.front();

  const json& branch_records = r.array(replay, "replay", "branch_records", kMaxReplayLanes);
  if (branch_records.size() != lanes.size())
    r.fail("replay.branch_records", std::to_string(branch_records.size()) + " entries for " +
                                        std::to_string(lanes.size()) + " lanes");
  for (size_t i = 0; i < lanes.size(); ++i) {
    const std::string w = at("lanes", i);
    Lane lane;
    lane.id = r.integer(lanes[i], w, "id", static_cast<int>(i), static_cast<int>(i));
    try {
      lane.params = parse_strategy(r.string(lanes[i], w, "strategy"));
    } catch (const Error& e) {
      r.fail(w + ".strategy", e.what());
    }
    lane.generated =
        r.ints(lanes[i], w, "generated", static_cast<size_t>(max_ctx), 0, cfg.vocab_size - 1);
    lane.stop_reason = r.string(lanes[i], w, "stop_reason");
    lane.parent = r.integer(lanes[i], w, "parent", -1, static_cast<int>(i) - 1);
    lane.branch_step = r.integer(lanes[i], w, "branch_step", -1, shape.steps - 1);
    lane.first_step = r.integer(lanes[i], w, "first_step", 0, shape.steps);
    lane.closed = r.boolean(lanes[i], w, "closed");
    if ((lane.parent < 0) != (lane.branch_step < 0))
      r.fail(w, "a branched lane needs both \"parent\" and \"branch_step\"");
    if (!branch_records[i].is_null()) {
      auto rec = std::make_shared<const LaneStep>(
          read_lane_step(r, branch_records[i], at("replay.branch_records", i), shape, lists));
      if (rec->lane != static_cast<int>(i)) r.fail(at("replay.branch_records", i), "wrong lane");
      lane.branch_record = std::move(rec);
    }
    if (lane.parent >= 0 && !lane.branch_record)
      r.fail(at("replay.branch_records", i), "a branched lane needs its branch record");
    snap.lanes.push_back(std::move(lane));
  }

  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string w = at("steps", i);
    const json& st = steps[i];
    auto trace = std::make_shared<StepTrace>();
    trace->index = r.integer(st, w, "index", static_cast<int>(i), static_cast<int>(i));
    const std::string& phase = r.string(st, w, "phase");
    if (phase != (i == 0 ? "prefill" : "decode"))
      r.fail(w + ".phase", "\"" + phase.substr(0, 32) + "\", expected " +
                               (i == 0 ? "\"prefill\"" : "\"decode\""));
    trace->phase = i == 0 ? Phase::kPrefill : Phase::kDecode;
    trace->backend = r.string(st, w, "backend");
    trace->kv_cache = r.boolean(st, w, "kv_cache");
    trace->recomputed_tokens = r.integer(st, w, "recomputed_tokens", 0, 1 << 30);
    trace->seconds = r.number(st, w, "seconds");
    trace->cost.flops = r.number(st, w, "flops");
    trace->cost.weight_bytes = r.number(st, w, "weight_bytes");
    trace->cost.kv_read_bytes = r.number(st, w, "kv_read_bytes");
    trace->cost.kv_write_bytes = r.number(st, w, "kv_write_bytes");
    const json& rep = r.field(st, w, "replay");
    trace->kv_after =
        read_kv(r, r.field(st, w, "kv"), w + ".kv", r.field(rep, w + ".replay", "kv_ref_counts"));
    // Which lane and beam held each sequence (files written before it was
    // stored have none: the KV cache panel then numbers the sequences).
    if (rep.is_object() && rep.contains("kv_owners")) {
      const json& owners = r.array(rep, w + ".replay", "kv_owners", 4096);
      for (size_t k = 0; k < owners.size(); ++k) {
        const std::string ow = at(w + ".replay.kv_owners", k);
        KvSequenceOwner o;
        o.seq = r.integer(owners[k], ow, "seq", 0, std::numeric_limits<int>::max());
        o.lane = r.integer(owners[k], ow, "lane", 0, static_cast<int>(snap.lanes.size()) - 1);
        o.beam = r.integer(owners[k], ow, "beam", -1, kMaxReplayLanes * 64);
        if (std::none_of(trace->kv_after.sequences.begin(), trace->kv_after.sequences.end(),
                         [&](const SequenceOccupancy& so) { return so.id == o.seq; }))
          r.fail(ow + ".seq", "sequence " + std::to_string(o.seq) + " is not in the step's cache");
        trace->kv_owners.push_back(o);
      }
    }
    const json& recs = r.array(rep, w + ".replay", "lanes", kMaxReplayLanes);
    if (recs.empty()) r.fail(w + ".replay.lanes", "a step with no lane");
    for (size_t k = 0; k < recs.size(); ++k) {
      LaneStep ls = read_lane_step(r, recs[k], at(w + ".replay.lanes", k), shape, lists);
      if (static_cast<int>(i) < snap.lanes[ls.lane].first_step)
        r.fail(at(w + ".replay.lanes", k), "lane " + std::to_string(ls.lane) +
                                               " has no record before its first step " +
                                               std::to_string(snap.lanes[ls.lane].first_step));
      for (const LaneStep& other : trace->lanes)
        if (other.lane == ls.lane) r.fail(at(w + ".replay.lanes", k), "a lane appears twice");
      trace->lanes.push_back(std::move(ls));
    }
    snap.history.push_back(std::move(trace));
  }

  const std::string& state = r.string(doc, "", "state");
  if (state == "paused")
    snap.state = SessionState::kPaused;
  else if (state == "finished")
    snap.state = SessionState::kFinished;
  else if (state == "ready for prefill")
    snap.state = SessionState::kReady;
  else if (state == "no prompt")
    snap.state = SessionState::kNoPrompt;
  else
    r.fail("state", "unknown state \"" + state.substr(0, 32) + "\"");
  if (snap.history.empty() !=
      (snap.state == SessionState::kReady || snap.state == SessionState::kNoPrompt))
    r.fail("state",
           "\"" + state + "\" does not match " + std::to_string(snap.history.size()) + " steps");
  if (!snap.history.empty() && snap.lanes.empty()) r.fail("lanes", "steps but no lane");
  snap.kv = snap.history.empty() ? KvOccupancy{} : snap.history.back()->kv_after;
  return out;
}

ImportedSession import_session_file(const std::filesystem::path& file) {
  const std::string text = read_regular_file(file, kMaxSessionFileBytes, "a session file");
  return import_session_text(text, file.string());
}

}  // namespace ts
