#include "sampling/lookahead.h"

#include <algorithm>

#include "sampling/draw.h"
#include "sampling/speculative.h"
#include "util/error.h"

namespace ts {

void validate(const LookaheadConfig& c) {
  if (c.window < 1 || c.window > kMaxLookaheadWindow)
    throw Error("lookahead: the window W must be from 1 to " + std::to_string(kMaxLookaheadWindow) +
                " (got " + std::to_string(c.window) + ")");
  if (c.ngram < 2 || c.ngram > kMaxLookaheadNgram)
    throw Error("lookahead: the n-gram size N must be from 2 to " +
                std::to_string(kMaxLookaheadNgram) + " (got " + std::to_string(c.ngram) + ")");
  if (c.verify < 1 || c.verify > kMaxLookaheadVerify)
    throw Error("lookahead: the verified candidates G must be from 1 to " +
                std::to_string(kMaxLookaheadVerify) + " (got " + std::to_string(c.verify) + ")");
}

void validate(const PromptLookupConfig& c) {
  if (c.tokens < 1 || c.tokens > kMaxPromptLookupTokens)
    throw Error("prompt_lookup: the draft tokens K must be from 1 to " +
                std::to_string(kMaxPromptLookupTokens) + " (got " + std::to_string(c.tokens) + ")");
  if (c.max_ngram < 1 || c.max_ngram > kMaxPromptLookupNgram)
    throw Error("prompt_lookup: the matched n-gram size M must be from 1 to " +
                std::to_string(kMaxPromptLookupNgram) + " (got " + std::to_string(c.max_ngram) +
                ")");
}

LookaheadWindow initial_window(const LookaheadConfig& config, const std::vector<int>& context) {
  if (context.empty()) throw Error("lookahead: an empty context");
  LookaheadWindow w;
  w.rows = config.ngram - 1;
  w.cols = config.window;
  for (int r = 0; r < w.rows; ++r)
    for (int c = 0; c < w.cols; ++c) {
      const uint64_t h = splitmix64((static_cast<uint64_t>(r) << 32) ^ static_cast<uint64_t>(c));
      w.tokens.push_back(context[h % context.size()]);
    }
  w.changed.assign(w.tokens.size(), 1);
  return w;
}

LookaheadWindow next_window(const LookaheadWindow& w, const std::vector<int>& outputs) {
  if (static_cast<int>(outputs.size()) != w.cols)
    throw Error("lookahead: one output per window column is needed");
  LookaheadWindow next = w;
  const size_t cols = static_cast<size_t>(w.cols);
  for (size_t i = 0; i + cols < w.tokens.size(); ++i) next.tokens[i] = w.tokens[i + cols];
  std::copy(outputs.begin(), outputs.end(), next.tokens.end() - static_cast<long>(cols));
  for (size_t i = 0; i < next.tokens.size(); ++i) next.changed[i] = next.tokens[i] != w.tokens[i];
  return next;
}

std::vector<std::vector<int>> window_ngrams(const LookaheadWindow& w,
                                            const std::vector<int>& outputs) {
  if (static_cast<int>(outputs.size()) != w.cols)
    throw Error("lookahead: one output per window column is needed");
  std::vector<std::vector<int>> grams;
  for (int c = 0; c < w.cols; ++c) {
    std::vector<int> g;
    for (int r = 0; r < w.rows; ++r) g.push_back(w.at(r, c));
    g.push_back(outputs[c]);
    grams.push_back(std::move(g));
  }
  return grams;
}

bool NgramPool::add(const std::vector<int>& gram) {
  if (static_cast<int>(gram.size()) != n_) throw Error("lookahead: n-gram of the wrong size");
  std::vector<std::vector<int>>& list = grams_[gram[0]];
  const std::vector<int> rest(gram.begin() + 1, gram.end());
  const auto it = std::find(list.begin(), list.end(), rest);
  const bool is_new = it == list.end();
  if (!is_new) list.erase(it);
  list.insert(list.begin(), rest);
  if (is_new) ++size_;
  return is_new;
}

std::vector<std::vector<int>> NgramPool::candidates(int first, int max) const {
  const auto it = grams_.find(first);
  if (it == grams_.end()) return {};
  const auto& list = it->second;
  return {list.begin(), list.begin() + std::min<long>(max, static_cast<long>(list.size()))};
}

std::vector<int> prompt_lookup_draft(const std::vector<int>& context,
                                     const PromptLookupConfig& config) {
  const int len = static_cast<int>(context.size());
  for (int n = std::min(config.max_ngram, len - 1); n >= 1; --n) {
    // The most recent earlier start s < len - n whose n tokens equal the last n.
    for (int s = len - n - 1; s >= 0; --s) {
      if (!std::equal(context.begin() + s, context.begin() + s + n, context.end() - n)) continue;
      const int from = s + n, to = std::min(len, from + config.tokens);
      if (from < to) return {context.begin() + from, context.begin() + to};
    }
  }
  return {};
}

LookaheadPassLayout lay_out_lookahead_pass(int last_token, int start_pos,
                                           const LookaheadWindow* window,
                                           std::vector<std::vector<int>> candidates, int n_ctx) {
  LookaheadPassLayout l;
  const int room = n_ctx - start_pos;  // fed tokens the context still holds (x included)
  if (room < 1) throw Error("lookahead: the context is full");
  int cand_tokens = 0;
  for (const auto& c : candidates) cand_tokens += static_cast<int>(c.size());
  // A window cell's position reaches start_pos + (N-1) + (W-1).
  const bool with_window = window && window->rows > 0 && window->cols > 0 &&
                           1 + cand_tokens + window->rows * window->cols <= room &&
                           start_pos + window->rows + window->cols - 1 < n_ctx;
  int budget = room - 1 - (with_window ? window->rows * window->cols : 0);
  std::vector<std::vector<int>> kept;
  for (auto& c : candidates) {
    if (c.empty()) continue;
    const int len = std::min<int>(static_cast<int>(c.size()), budget);
    if (len < 1) break;
    c.resize(len);
    budget -= len;
    kept.push_back(std::move(c));
  }
  l.candidates = std::move(kept);

  l.tokens = {last_token};
  l.positions = {start_pos};
  std::vector<std::vector<int>> sees = {{0}};  // per row, the rows it attends to
  for (const auto& c : l.candidates) {
    const int first = static_cast<int>(l.tokens.size());
    l.candidate_row.push_back(first);
    for (int i = 0; i < static_cast<int>(c.size()); ++i) {
      l.tokens.push_back(c[i]);
      l.positions.push_back(start_pos + 1 + i);
      std::vector<int> s = {0};
      for (int j = 0; j <= i; ++j) s.push_back(first + j);
      sees.push_back(std::move(s));
    }
  }
  if (with_window) {
    l.window_row = static_cast<int>(l.tokens.size());
    l.window_rows = window->rows;
    l.window_cols = window->cols;
    const auto cell = [&](int r, int c) { return l.window_row + r * window->cols + c; };
    for (int r = 0; r < window->rows; ++r)
      for (int c = 0; c < window->cols; ++c) {
        l.tokens.push_back(window->at(r, c));
        l.positions.push_back(start_pos + 1 + r + c);
        std::vector<int> s = {0};
        for (int j = 0; j <= c; ++j) s.push_back(cell(0, j));
        for (int rr = 1; rr <= r; ++rr) s.push_back(cell(rr, c));
        sees.push_back(std::move(s));
      }
  }
  const size_t n = l.tokens.size();
  l.mask.assign(n * n, 0);
  for (size_t i = 0; i < n; ++i)
    for (int j : sees[i]) l.mask[i * n + j] = 1;
  return l;
}

int accept_one_of(std::vector<float>& p, const std::vector<int>& tokens,
                  const std::function<double(int)>& uniform, int& next_uniform, int* drawn) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int t = tokens[i];
    double sum = 0;
    for (float v : p) sum += v;
    if (!(sum > 0)) break;
    const double u = uniform(next_uniform++);
    if (u < p[t] / sum) return static_cast<int>(i);
    p[t] = 0.0f;  // rejected: the rest of p, renormalised by the next test
  }
  *drawn = draw_from_probs(p, uniform(next_uniform++));
  return -1;
}

LookaheadVerdict verify_lookahead(const LookaheadPassLayout& layout, bool sample,
                                  const std::function<RowChoice(int)>& row,
                                  const std::function<double(int)>& uniform) {
  LookaheadVerdict v;
  v.kept_rows = {0};
  std::vector<int> alive;  // candidates still matching
  for (size_t g = 0; g < layout.candidates.size(); ++g) alive.push_back(static_cast<int>(g));
  int at = 0;  // the row whose output is decided now
  int next_uniform = 0;
  for (int depth = 0;; ++depth) {
    RowChoice choice = row(at);
    std::vector<int> offered;  // alive candidates' tokens at this depth, in order
    std::vector<int> offered_by;
    for (int g : alive)
      if (depth < static_cast<int>(layout.candidates[g].size())) {
        offered.push_back(layout.candidates[g][depth]);
        offered_by.push_back(g);
      }
    int token = -1;
    if (!sample) {
      token = choice.argmax;
    } else {
      int drawn = -1;
      const int first_uniform = next_uniform;
      const int i = accept_one_of(choice.probs, offered, uniform, next_uniform, &drawn);
      token = i >= 0 ? offered[i] : drawn;
      std::vector<int> tried(
          offered.begin(), offered.begin() + (i >= 0 ? i + 1 : static_cast<long>(offered.size())));
      if (i < 0) tried.push_back(drawn);
      v.tried.push_back(std::move(tried));
      std::vector<double> us;
      for (int k = first_uniform; k < next_uniform; ++k) us.push_back(uniform(k));
      v.uniforms.push_back(std::move(us));
    }
    v.committed.push_back(token);
    std::vector<int> still;
    for (size_t i = 0; i < offered.size(); ++i)
      if (offered[i] == token) still.push_back(offered_by[i]);
    if (still.empty()) break;  // the model's own token ends the pass
    alive = still;
    v.candidate = alive[0];
    v.matched = depth + 1;
    at = layout.candidate_row[alive[0]] + depth;
  }
  // The accepted tokens' rows of the candidate that matched longest (an
  // earlier candidate sharing a prefix gave the same rows the same bits).
  for (int i = 0; i < v.matched; ++i) v.kept_rows.push_back(layout.candidate_row[v.candidate] + i);
  return v;
}

double lookahead_uniform(uint64_t seed, int first_index, int k) {
  if (first_index < 0 || k < 0 || k >= 1024) throw Error("lookahead: bad random-number index");
  const uint64_t stream = splitmix64(seed ^ 0x100cabeadull);
  return uniform_for_step(stream, first_index * 1024 + k);
}

}  // namespace ts
