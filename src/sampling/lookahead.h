#pragma once
// Lookahead decoding (Fu et al. 2023, "Break the Sequential Dependency of LLM
// Inference Using Lookahead Decoding") and prompt lookup decoding, the pure
// parts: the 2D Jacobi window, the n-gram pool, the layout of one pass (its
// tokens, positions and attention mask) and the verification of candidates.
// session/lookahead_lane.h runs them on an engine.
//
// One pass feeds three kinds of rows after the last committed token x (at
// position P, whose K/V the pass writes):
//  - verification: up to G candidate continuations of x (from the pool, or
//    for prompt lookup the one draft copied from the context), each a causal
//    branch at positions P+1, P+2, ...;
//  - lookahead: the (N-1) x W window, cell (r, c) at position P+1+r+c. It
//    sees x, row 0 up to its own column, and its column's cells above it:
//    positions P..P+1+r+c, one token each (the paper's mask).
// Every row attends to the cached context and x. A row's output is the
// model's next token after it: the verification rows check the candidates,
// the last window row's outputs are the window's next Jacobi row, and each
// column (its N-1 cells and that output) is an n-gram for the pool.
//
// Greedy verification accepts the longest candidate prefix equal to the
// model's own choices, then adds the model's choice after it: the output is
// plain greedy's, token for token. Sampled verification (the paper's, as
// SpecInfer's for deterministic drafts): at each depth the surviving
// candidates' tokens are tried in turn, each accepted with probability p(t)
// under the current p, which on a rejection becomes p with t removed,
// renormalised; when none is accepted the token is drawn from what is left.
// Each committed token follows plain sampling's distribution exactly.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ts {

// lookahead=W,N,G. The defaults are small (the paper's, for 7B models on a
// GPU, are W 15, N 5, G 15): a pass feeds at most 1 + (N-1)(W+G) = 17 rows,
// and a CPU pass of more than 8 rows leaves the matmul's weight-streaming
// path, so each row added costs (docs/performance.md has the measurements).
struct LookaheadConfig {
  int window = 4;  // W: columns of the Jacobi window
  int ngram = 3;   // N: n-gram size (the window has N-1 rows)
  int verify = 4;  // G: at most this many candidates verified per pass
  bool operator==(const LookaheadConfig&) const = default;
};
inline constexpr int kMaxLookaheadWindow = 16;
inline constexpr int kMaxLookaheadNgram = 8;
inline constexpr int kMaxLookaheadVerify = 16;

// prompt_lookup=K[,M]: up to K draft tokens copied after the most recent
// earlier occurrence of the context's last n tokens, n = M down to 1 (HF's
// prompt_lookup_num_tokens and max_matching_ngram_size).
struct PromptLookupConfig {
  int tokens = 10;    // K
  int max_ngram = 2;  // M
  bool operator==(const PromptLookupConfig&) const = default;
};
inline constexpr int kMaxPromptLookupTokens = 32;
inline constexpr int kMaxPromptLookupNgram = 8;

// Throws ts::Error naming the parameter when a value is out of range.
void validate(const LookaheadConfig& config);
void validate(const PromptLookupConfig& config);

// The (N-1) x W window of Jacobi guesses, row-major.
struct LookaheadWindow {
  int rows = 0, cols = 0;
  std::vector<int> tokens;       // [rows][cols]
  std::vector<uint8_t> changed;  // [rows][cols]: 1 where the last Jacobi step changed the cell
  int at(int r, int c) const { return tokens[static_cast<size_t>(r) * cols + c]; }
};

// The first window: tokens of the context picked by a fixed hash of the cell
// (the paper starts from random tokens; the context's are likelier to recur).
LookaheadWindow initial_window(const LookaheadConfig& config, const std::vector<int>& context);

// The next window: rows move up one, and the last row becomes the model's
// guesses after the last row's cells (`outputs`, W of them).
LookaheadWindow next_window(const LookaheadWindow& window, const std::vector<int>& outputs);

// The n-grams the pass found: column c's cells top to bottom, then outputs[c].
std::vector<std::vector<int>> window_ngrams(const LookaheadWindow& window,
                                            const std::vector<int>& outputs);

// n-grams keyed by their first token, each key's list most recent first and
// without repeats (an n-gram seen again moves to the front).
class NgramPool {
 public:
  explicit NgramPool(int n = 3) : n_(n) {}
  int n() const { return n_; }
  // Adds one n-gram (n tokens); returns true when it was not in the pool.
  bool add(const std::vector<int>& gram);
  // Up to `max` continuations (the n-1 tokens after `first`), most recent first.
  std::vector<std::vector<int>> candidates(int first, int max) const;
  int size() const { return size_; }

 private:
  int n_ = 3;
  int size_ = 0;
  std::map<int, std::vector<std::vector<int>>> grams_;  // first token -> continuations
};

// The draft prompt lookup proposes after `context` (empty: no match).
std::vector<int> prompt_lookup_draft(const std::vector<int>& context,
                                     const PromptLookupConfig& config);

// One pass: what is fed, where each part sits, and how much was left out for
// lack of context.
struct LookaheadPassLayout {
  std::vector<int> tokens, positions;
  std::vector<uint8_t> mask;                 // [n][n], n = tokens.size()
  std::vector<std::vector<int>> candidates;  // candidate g at candidate_row[g] + i
  std::vector<int> candidate_row;
  int window_row = -1;  // cell (r, c) at window_row + r * W + c; -1: no window this pass
  int window_rows = 0, window_cols = 0;
};

// Lays out the pass after last token x at position start_pos. Parts that
// would pass the model's context (n_ctx positions and cached tokens) are left
// out: the window first, then candidates from the last; x alone is a plain
// decode step.
LookaheadPassLayout lay_out_lookahead_pass(int last_token, int start_pos,
                                           const LookaheadWindow* window,
                                           std::vector<std::vector<int>> candidates, int n_ctx);

// The lane's distribution at one fed row: its warped probabilities and, for
// greedy, its choice (the argmax of its logits, ties to the lower id).
struct RowChoice {
  std::vector<float> probs;
  int argmax = -1;
};

struct LookaheadVerdict {
  std::vector<int> committed;  // accepted candidate tokens, then the model's own (1 + matched)
  int matched = 0;             // candidate tokens accepted
  int candidate = -1;          // whose prefix was accepted (-1: none)
  std::vector<int> kept_rows;  // fed rows whose K/V stays: 0, then the accepted tokens' rows
  // Sampled only: at each depth, the tokens tried in turn and the uniforms
  // they were tested with; the last token is the drawn one when none passed.
  std::vector<std::vector<int>> tried;
  std::vector<std::vector<double>> uniforms;
};

// Verifies the layout's candidates. row(i) gives the lane's distribution at
// fed row i (called once per row it needs); uniform(k) the k-th uniform in
// [0, 1) of this pass (sampled only). Throws ts::Error when a distribution
// has no positive entry.
LookaheadVerdict verify_lookahead(const LookaheadPassLayout& layout, bool sample,
                                  const std::function<RowChoice(int)>& row,
                                  const std::function<double(int)>& uniform);

// The test of one depth of sampled verification, on its own: tries `tokens`
// in turn against p (which it changes), returns the index of the accepted
// one, or -1 with the final token drawn from what is left in *drawn.
int accept_one_of(std::vector<float>& p, const std::vector<int>& tokens,
                  const std::function<double(int)>& uniform, int& next_uniform, int* drawn);

// The uniforms of a sampled lookahead or prompt-lookup pass, keyed by the
// index of the first token it commits: counter-based, on a stream of their own.
double lookahead_uniform(uint64_t seed, int first_index, int k);

}  // namespace ts
