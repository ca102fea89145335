// Lookahead decoding and prompt lookup: the strategy strings, the window, the
// pool and the pass layout (the paper's mask), and the two promises: greedy
// lookahead / prompt lookup give greedy's tokens exactly (on the bundled
// model and two random checkpoints of other shapes), and sampled
// verification keeps plain sampling's distribution (chi-square, with a wrong
// rule as the negative control).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "chi_square.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "model/model_loader.h"
#include "sampling/lookahead.h"
#include "sampling/sampling_params.h"
#include "sampling/sampling_pipeline.h"
#include "sampling/speculative.h"
#include "session/lane_summary.h"
#include "session/lookahead_lane.h"
#include "session/session.h"
#include "session/session_export.h"
#include "session/session_import.h"
#include "test_model_writer.h"
#include "test_models.h"
#include "test_paths.h"
#include "util/error.h"

namespace ts {
namespace {

// ---- strategy strings ----

TEST(LookaheadStrategy, ParsesFormatsAndRefuses) {
  const SamplingParams d = parse_strategy("lookahead");
  EXPECT_TRUE(d.lookahead_on);
  EXPECT_FALSE(d.do_sample);
  EXPECT_EQ(d.lookahead, LookaheadConfig{});
  const SamplingParams p = parse_strategy("lookahead=6,4,3,top_p=0.9,seed=5");
  EXPECT_EQ(p.lookahead.window, 6);
  EXPECT_EQ(p.lookahead.ngram, 4);
  EXPECT_EQ(p.lookahead.verify, 3);
  EXPECT_TRUE(p.do_sample);
  EXPECT_EQ(parse_strategy(format_strategy(p)), p);
  EXPECT_EQ(format_strategy(d), "lookahead=4,3,4");
  EXPECT_EQ(describe(d), "lookahead 4,3,4 \u00b7 greedy");
  const SamplingParams q = parse_strategy("prompt_lookup=8,3");
  EXPECT_TRUE(q.prompt_lookup_on);
  EXPECT_EQ(q.prompt_lookup.tokens, 8);
  EXPECT_EQ(q.prompt_lookup.max_ngram, 3);
  EXPECT_EQ(parse_strategy(format_strategy(q)), q);
  EXPECT_EQ(parse_strategy("prompt_lookup").prompt_lookup, PromptLookupConfig{});
  EXPECT_EQ(parse_strategy("lookahead=5").lookahead.ngram, 3);  // the rest keep their defaults

  for (const char* bad :
       {"lookahead=0", "lookahead=4,1", "lookahead=4,3,0", "lookahead=4,3,4,5", "lookahead,4",
        "lookahead=17", "prompt_lookup=0", "prompt_lookup=4,9", "prompt_lookup=4,2,1",
        "lookahead,prompt_lookup", "lookahead,beams=2", "lookahead,contrastive=4",
        "lookahead,spec=4", "prompt_lookup,dola=low", "lookahead=x"})
    EXPECT_THROW(parse_strategy(bad), Error) << bad;
}

// ---- the pure parts ----

TEST(LookaheadWindow, JacobiStepShiftsRowsAndColumnsGiveNgrams) {
  LookaheadWindow w;
  w.rows = 2;
  w.cols = 3;
  w.tokens = {1, 2, 3, 4, 5, 6};
  w.changed.assign(6, 0);
  const std::vector<int> out = {7, 5, 9};
  const auto grams = window_ngrams(w, out);
  ASSERT_EQ(grams.size(), 3u);
  EXPECT_EQ(grams[0], (std::vector<int>{1, 4, 7}));
  EXPECT_EQ(grams[2], (std::vector<int>{3, 6, 9}));
  const LookaheadWindow n = next_window(w, out);
  EXPECT_EQ(n.tokens, (std::vector<int>{4, 5, 6, 7, 5, 9}));
  EXPECT_EQ(n.changed, (std::vector<uint8_t>{1, 1, 1, 1, 0, 1}));
  EXPECT_THROW(next_window(w, {1, 2}), Error);
}

TEST(LookaheadPool, KeyedByFirstTokenMostRecentFirstWithoutRepeats) {
  NgramPool pool(3);
  EXPECT_TRUE(pool.add({5, 1, 2}));
  EXPECT_TRUE(pool.add({5, 3, 4}));
  EXPECT_TRUE(pool.add({6, 1, 2}));
  EXPECT_FALSE(pool.add({5, 1, 2}));  // seen again: to the front, not twice
  EXPECT_EQ(pool.size(), 3);
  EXPECT_EQ(pool.candidates(5, 8), (std::vector<std::vector<int>>{{1, 2}, {3, 4}}));
  EXPECT_EQ(pool.candidates(5, 1), (std::vector<std::vector<int>>{{1, 2}}));
  EXPECT_TRUE(pool.candidates(7, 8).empty());
  EXPECT_THROW(pool.add({1, 2}), Error);
}

TEST(PromptLookup, CopiesAfterTheMostRecentMatchOfTheLongestSuffix) {
  const PromptLookupConfig c{3, 2};
  // Last two tokens (8, 9) occur at 1 and 5; the most recent earlier one is 5.
  EXPECT_EQ(prompt_lookup_draft({7, 8, 9, 1, 2, 8, 9, 3, 4, 5, 8, 9}, c),
            (std::vector<int>{3, 4, 5}));
  // No bigram match: the last token alone (9 at 2), up to the end of the context.
  EXPECT_EQ(prompt_lookup_draft({1, 9, 2, 9}, c), (std::vector<int>{2, 9}));
  EXPECT_TRUE(prompt_lookup_draft({1, 2, 3}, c).empty());
  EXPECT_TRUE(prompt_lookup_draft({4}, c).empty());
}

TEST(LookaheadPass, LayoutHasThePapersMask) {
  LookaheadWindow w;
  w.rows = 2;  // N = 3
  w.cols = 3;  // W = 3
  w.tokens = {10, 11, 12, 20, 21, 22};
  w.changed.assign(6, 0);
  const auto l = lay_out_lookahead_pass(99, 40, &w, {{1, 2}, {3}}, 1024);
  // x, candidate {1, 2}, candidate {3}, then the window row by row.
  EXPECT_EQ(l.tokens, (std::vector<int>{99, 1, 2, 3, 10, 11, 12, 20, 21, 22}));
  EXPECT_EQ(l.positions, (std::vector<int>{40, 41, 42, 41, 41, 42, 43, 42, 43, 44}));
  EXPECT_EQ(l.candidate_row, (std::vector<int>{1, 3}));
  EXPECT_EQ(l.window_row, 4);
  const size_t n = l.tokens.size();
  const auto sees = [&](int i) {
    std::vector<int> s;
    for (size_t j = 0; j < n; ++j)
      if (l.mask[i * n + j]) s.push_back(static_cast<int>(j));
    return s;
  };
  EXPECT_EQ(sees(2), (std::vector<int>{0, 1, 2}));     // candidate 0, second token
  EXPECT_EQ(sees(3), (std::vector<int>{0, 3}));        // candidate 1 does not see candidate 0
  EXPECT_EQ(sees(6), (std::vector<int>{0, 4, 5, 6}));  // row 0, column 2: row 0 up to itself
  // Row 1, column 2 (position 44): x, row 0 columns 0..2, then itself.
  EXPECT_EQ(sees(9), (std::vector<int>{0, 4, 5, 6, 9}));
  // Each row sees one token per position from x's to its own.
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int> s = sees(static_cast<int>(i));
    for (size_t k = 0; k < s.size(); ++k) EXPECT_EQ(l.positions[s[k]], 40 + static_cast<int>(k));
  }
  // No room: the window goes first, then candidates are cut.
  const auto tight = lay_out_lookahead_pass(99, 1020, &w, {{1, 2}, {3}}, 1024);
  EXPECT_EQ(tight.window_row, -1);
  EXPECT_EQ(tight.tokens, (std::vector<int>{99, 1, 2, 3}));
  const auto last = lay_out_lookahead_pass(99, 1023, &w, {{1, 2}}, 1024);
  EXPECT_EQ(last.tokens, (std::vector<int>{99}));
}

TEST(LookaheadVerify, GreedyTakesTheLongestMatchThenTheModelsToken) {
  LookaheadPassLayout l = lay_out_lookahead_pass(5, 10, nullptr, {{7, 8, 1}, {7, 9, 9}, {2}}, 100);
  // The model's choice after each row: x -> 7; cand 0: 7 -> 9, ...; cand 1: 7 -> 9, 9 -> 4.
  const std::map<int, int> choice = {{0, 7}, {1, 9}, {2, 0}, {3, 0},
                                     {4, 9}, {5, 9}, {6, 4}, {7, 0}};
  std::vector<int> asked;
  const auto row = [&](int r) {
    asked.push_back(r);
    return RowChoice{{}, choice.at(r)};
  };
  const LookaheadVerdict v = verify_lookahead(l, false, row, [](int) { return 0.0; });
  EXPECT_EQ(v.committed, (std::vector<int>{7, 9, 9, 4}));
  EXPECT_EQ(v.matched, 3);
  EXPECT_EQ(v.candidate, 1);
  EXPECT_EQ(v.kept_rows, (std::vector<int>{0, 4, 5, 6}));
  EXPECT_EQ(asked, (std::vector<int>{0, 1, 5, 6}));
}

// ---- greedy equality on real models ----

struct Run {
  std::vector<int> tokens;
  int passes = 0;
};

std::vector<int> greedy_reference(Engine& engine, const std::vector<int>& prompt, int n) {
  const SeqId seq = engine.cache().create();
  std::vector<int> ctx = prompt, out;
  std::vector<int> feed = prompt;
  const SamplingParams greedy;
  for (int i = 0; i < n; ++i) {
    ForwardResult r = engine.forward({{seq, feed}}, {});
    const int t = sample_next(r.outputs[0].logits, ctx, greedy, i).draw.chosen_token;
    out.push_back(t);
    ctx.push_back(t);
    feed = {t};
  }
  engine.cache().release(seq);
  return out;
}

Run lookahead_run(Engine& engine, const std::vector<int>& prompt, int n,
                  const SamplingParams& params) {
  const SeqId seq = engine.cache().create();
  std::vector<int> ctx = prompt;
  engine.forward({{seq, std::vector<int>(prompt.begin(), prompt.end() - 1)}}, {});
  std::shared_ptr<const LookaheadState> state;
  if (params.lookahead_on) state = initial_lookahead_state(params.lookahead, prompt);
  const LookaheadContext lc{engine, nullptr, {}};
  Run run;
  while (static_cast<int>(run.tokens.size()) < n) {
    LookaheadPass pass =
        run_lookahead_pass(lc, seq, ctx, static_cast<int>(run.tokens.size()), params, state);
    ++run.passes;
    if (pass.state_after) state = pass.state_after;
    for (int t : pass.verdict.committed) {
      run.tokens.push_back(t);
      ctx.push_back(t);
    }
    engine.cache().check_invariants();
  }
  run.tokens.resize(n);
  engine.cache().release(seq);
  return run;
}

// 50 prompts: half repetitive (where lookahead has something to find), half
// random ids.
std::vector<std::vector<int>> prompts(int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int>> out;
  for (int i = 0; i < 50; ++i) {
    std::vector<int> p;
    if (i % 2 == 0) {
      std::vector<int> unit;
      for (int k = 0; k < 2 + i % 5; ++k) unit.push_back(static_cast<int>(rng() % vocab));
      for (int rep = 0; rep < 3; ++rep) p.insert(p.end(), unit.begin(), unit.end());
    } else {
      for (int k = 0; k < 3 + i % 13; ++k) p.push_back(static_cast<int>(rng() % vocab));
    }
    out.push_back(p);
  }
  return out;
}

void expect_lossless(const std::shared_ptr<const ModelWeights>& w, const char* name) {
  Engine engine(w, make_cpu_backend(w, 2), 3 * w->config.n_ctx);
  SamplingParams la = parse_strategy("lookahead");
  SamplingParams pl = parse_strategy("prompt_lookup");
  int tokens = 0, la_passes = 0, pl_passes = 0;
  for (const auto& prompt : prompts(w->config.vocab_size, 7)) {
    const std::vector<int> ref = greedy_reference(engine, prompt, 64);
    const Run a = lookahead_run(engine, prompt, 64, la);
    const Run b = lookahead_run(engine, prompt, 64, pl);
    ASSERT_EQ(a.tokens, ref) << name << ": lookahead differs from greedy";
    ASSERT_EQ(b.tokens, ref) << name << ": prompt lookup differs from greedy";
    tokens += 64;
    la_passes += a.passes;
    pl_passes += b.passes;
  }
  // The verification must have been exercised: several tokens in some passes.
  EXPECT_LT(la_passes, tokens) << name;
  EXPECT_LT(pl_passes, tokens) << name;
  std::printf("%s: 3,200 tokens in %d lookahead passes, %d prompt-lookup passes\n", name, la_passes,
              pl_passes);
}

TEST(LookaheadGreedy, EqualsGreedyOnTheBundledModel) {
  expect_lossless(std::make_shared<const ModelWeights>(load_model_dir(test::bundled_model_dir())),
                  "bundled");
}

TEST(LookaheadGreedy, EqualsGreedyOnRandomCheckpointsOfOtherShapes) {
  ModelConfig a = test::tiny_config();
  a.vocab_size = 97;
  a.n_ctx = 128;
  a.n_embd = 32;
  a.n_head = 4;
  a.n_layer = 2;
  ModelConfig b = a;
  b.vocab_size = 150;
  b.n_ctx = 96;
  b.n_embd = 48;
  b.n_head = 3;
  b.n_layer = 3;
  for (const auto& [cfg, seed, name] : {std::tuple{a, 3u, "random A"}, {b, 4u, "random B"}}) {
    auto model = std::make_shared<test::RandomGpt2>(test::make_random_gpt2(cfg, seed));
    auto w = std::shared_ptr<const ModelWeights>(new ModelWeights(test::as_model_weights(*model)),
                                                 [model](const ModelWeights* p) { delete p; });
    expect_lossless(w, name);
  }
}

// ---- sampled verification keeps the distribution ----

// The chi-square test of first tokens against p (chi_square.h's outcomes are
// one-token sequences).
double chi2_tokens(const std::map<int, int>& counts, const std::vector<float>& p, int n) {
  std::map<test::Outcome, int> c;
  for (const auto& [t, k] : counts) c[{t}] = k;
  std::map<test::Outcome, double> exact;
  for (size_t t = 0; t < p.size(); ++t)
    if (p[t] > 0) exact[{static_cast<int>(t)}] = p[t];
  return test::chi2_test(c, exact, n);
}

TEST(LookaheadSampled, FirstTokenFollowsPlainSamplingAndAWrongRuleDoesNot) {
  auto w = std::make_shared<const ModelWeights>(load_model_dir(test::bundled_model_dir()));
  Engine engine(w, make_cpu_backend(w, 2), 4 * w->config.n_ctx);
  const std::vector<int> prompt = {100, 200, 300, 400, 500, 600, 700, 800};
  SamplingParams params = parse_strategy("lookahead=2,3,3,temperature=0.6");
  // The exact distribution after the prompt, and candidates starting with
  // its three likeliest tokens (so that acceptance and rejection both happen).
  const ForwardResult full = engine.forward_scratch(prompt, {});
  const std::vector<float> p = sample_next(full.outputs[0].logits, prompt, params, 0).final_probs;
  std::vector<int> order(p.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::partial_sort(order.begin(), order.begin() + 3, order.end(),
                    [&](int a, int b) { return p[a] > p[b]; });
  auto state = std::make_shared<LookaheadState>(*initial_lookahead_state(params.lookahead, prompt));
  for (int k = 2; k >= 0; --k) state->pool.add({prompt.back(), order[k], 5});

  const SeqId base = engine.cache().create();
  engine.forward({{base, std::vector<int>(prompt.begin(), prompt.end() - 1)}}, {});
  const LookaheadContext lc{engine, nullptr, {}};
  const int n = 1200;
  std::map<int, int> right, wrong;
  for (int s = 0; s < n; ++s) {
    params.seed = static_cast<uint64_t>(s) + 1;
    const SeqId seq = engine.cache().fork(base);
    const LookaheadPass pass = run_lookahead_pass(lc, seq, prompt, 0, params, state);
    engine.cache().release(seq);
    ++right[pass.verdict.committed[0]];
    // Wrong: a rejected token is not removed before the next test / the draw.
    const auto u = [&](int k) { return lookahead_uniform(params.seed, 0, k); };
    int k = 0, chosen = -1;
    for (int c = 0; c < 3 && chosen < 0; ++c)
      if (u(k++) < p[order[c]]) chosen = order[c];
    if (chosen < 0) chosen = draw_from_probs(p, u(k));
    ++wrong[chosen];
  }
  const int accepted = right[order[0]] + right[order[1]] + right[order[2]];
  EXPECT_GT(accepted, n / 4) << "the candidates must be accepted often enough to test the rule";
  const double p_right = chi2_tokens(right, p, n), p_wrong = chi2_tokens(wrong, p, n);
  std::printf(
      "sampled lookahead: %d of %d first tokens were accepted candidates; chi-square p = "
      "%.3g (the rule), %.3g (the wrong rule)\n",
      accepted, n, p_right, p_wrong);
  EXPECT_GT(p_right, 0.01);
  EXPECT_LT(p_wrong, 1e-6);
}

// The second token, given the first: candidates that all start with the
// likeliest first token a and go on with the three likeliest tokens after it,
// so that a is committed only when accepted and the second token is then
// verified at depth 1 of the same pass. Conditioned on a, it must follow
// plain sampling's distribution after prompt + a; the wrong rule (a rejected
// token kept for the next test and the draw) at that depth must not.
TEST(LookaheadSampled, SecondTokenGivenTheFirstFollowsPlainSamplingAndAWrongRuleDoesNot) {
  auto w = std::make_shared<const ModelWeights>(load_model_dir(test::bundled_model_dir()));
  Engine engine(w, make_cpu_backend(w, 2), 4 * w->config.n_ctx);
  const std::vector<int> prompt = {100, 200, 300, 400, 500, 600, 700, 800};
  SamplingParams params = parse_strategy("lookahead=1,3,3,temperature=0.9");
  const auto top = [](const std::vector<float>& probs, int k) {
    std::vector<int> order(probs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int x, int y) { return probs[x] > probs[y]; });
    order.resize(k);
    return order;
  };
  const std::vector<float> p1 =
      sample_next(engine.forward_scratch(prompt, {}).outputs[0].logits, prompt, params, 0)
          .final_probs;
  const int a = top(p1, 1)[0];
  std::vector<int> after_a = prompt;
  after_a.push_back(a);
  const std::vector<float> p2 =
      sample_next(engine.forward_scratch(after_a, {}).outputs[0].logits, after_a, params, 1)
          .final_probs;
  const std::vector<int> second = top(p2, 3);
  auto state = std::make_shared<LookaheadState>(*initial_lookahead_state(params.lookahead, prompt));
  for (int k = 2; k >= 0; --k) state->pool.add({prompt.back(), a, second[k]});

  const SeqId base = engine.cache().create();
  engine.forward({{base, std::vector<int>(prompt.begin(), prompt.end() - 1)}}, {});
  const LookaheadContext lc{engine, nullptr, {}};
  const int want = 1000;  // passes that committed a first
  int n = 0, seeds = 0, accepted = 0;
  std::map<int, int> right, wrong;
  for (int s = 0; n < want && s < 20 * want; ++s) {
    params.seed = static_cast<uint64_t>(s) + 1;
    // A seed whose first uniform fails a's first test (with a margin for
    // rounding) cannot commit a: a is then removed from p. Its pass is not
    // run, to keep the test short; the first-token test covers those seeds.
    if (lookahead_uniform(params.seed, 0, 0) >= p1[a] * 1.001) continue;
    ++seeds;
    const SeqId seq = engine.cache().fork(base);
    const LookaheadPass pass = run_lookahead_pass(lc, seq, prompt, 0, params, state);
    engine.cache().release(seq);
    const LookaheadVerdict& v = pass.verdict;
    if (v.committed[0] != a) continue;
    ASSERT_GE(v.committed.size(), 2u) << "a is committed only as an accepted candidate";
    ASSERT_EQ(v.uniforms[0].size(), 1u) << "a is accepted at its first test";
    ++n;
    ++right[v.committed[1]];
    for (int t : second) accepted += v.committed[1] == t;
    // Wrong, at depth 1 with the same uniforms: a rejected token is not
    // removed before the next test / the draw.
    int k = static_cast<int>(v.uniforms[0].size()), chosen = -1;
    const auto u = [&](int i) { return lookahead_uniform(params.seed, 0, i); };
    for (int c = 0; c < 3 && chosen < 0; ++c)
      if (u(k++) < p2[second[c]]) chosen = second[c];
    if (chosen < 0) chosen = draw_from_probs(p2, u(k));
    ++wrong[chosen];
  }
  ASSERT_EQ(n, want) << "a was committed in " << n << " of " << seeds << " passes";
  EXPECT_GT(accepted, n / 4) << "the second tokens must be accepted often enough to test the rule";
  const double p_right = chi2_tokens(right, p2, n), p_wrong = chi2_tokens(wrong, p2, n);
  std::printf(
      "sampled lookahead: first token a (p %.3f) in %d of %d passes run; %d of its second tokens "
      "were candidates; chi-square p = %.3g (the rule), %.3g (the wrong rule)\n",
      p1[a], n, seeds, accepted, p_right, p_wrong);
  EXPECT_GT(p_right, 0.01);
  EXPECT_LT(p_wrong, 1e-6);
}

// ---- the session's lanes ----

namespace session_lanes {

std::vector<int> generated(const Session& s, int lane) { return s.lanes()[lane].generated; }

TEST(LookaheadSession, LanesGiveGreedysTokensAndStepBackWhole) {
  const LoadedModel m = test::load_model(test::bundled_model_dir(), "cpu", 6);
  SessionOptions o;
  o.max_new_tokens = 60;
  Session s(m.tokenizer, m.engine, o);
  s.set_prompt("1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,");
  s.set_strategies(
      {SamplingParams{}, parse_strategy("lookahead"), parse_strategy("prompt_lookup=6,2")});
  s.prefill();
  int steps = 0;
  bool multi = false;
  while (s.can_step()) {
    const StepTrace& t = s.step();
    ++steps;
    for (const LaneStep& ls : t.lanes) {
      if (!ls.lookahead) continue;
      EXPECT_EQ(ls.rows(), ls.lookahead->fed());
      EXPECT_EQ(ls.chosen_token, ls.lookahead->committed.back());
      multi = multi || ls.lookahead->committed.size() > 1;
      // The recorded attention covers every fed row: [head][rows][context].
      ASSERT_FALSE(ls.attention.empty());
      ASSERT_TRUE(ls.attention[0]);
      EXPECT_EQ(ls.attention[0]->size(),
                static_cast<size_t>(m.engine->config().n_head) * ls.rows() * ls.context());
    }
    m.engine->cache().check_invariants();
  }
  EXPECT_EQ(generated(s, 1), generated(s, 0));
  EXPECT_EQ(generated(s, 2), generated(s, 0));
  EXPECT_EQ(s.lanes()[1].stop_reason, s.lanes()[0].stop_reason);
  EXPECT_TRUE(multi) << "a counting prompt must let some pass commit several tokens";
  // Each committed token's log-probability is its own row's: the same text
  // scores the same as greedy's.
  EXPECT_NEAR(summarize_lane(s, 1).log_prob, summarize_lane(s, 0).log_prob, 1e-6);
  EXPECT_NEAR(summarize_lane(s, 2).log_prob, summarize_lane(s, 0).log_prob, 1e-6);
  EXPECT_LT(spec_lane_stats(s, 1).rounds, static_cast<int>(generated(s, 1).size()));
  // Back undoes whole passes: the tokens and the cache (which holds every
  // token but the last); stepping again gives the same tokens.
  const std::vector<int> full = generated(s, 1);
  const int prompt = static_cast<int>(s.prompt_tokens().size());
  const auto cached = [&] { return m.engine->cache().length(s.lanes()[1].seq); };
  while (generated(s, 1).size() == full.size()) s.back();
  EXPECT_LT(generated(s, 1).size() + 1, full.size() + 1);
  EXPECT_EQ(cached(), prompt + static_cast<int>(generated(s, 1).size()) - 1);
  while (s.can_step() && generated(s, 1).size() < full.size()) s.step();
  EXPECT_EQ(generated(s, 1), full);
  EXPECT_EQ(cached(), prompt + static_cast<int>(full.size()) - 1);
  EXPECT_THROW(s.branch(1, 1, 5), Error);
  EXPECT_THROW(s.rechoose(1, parse_strategy("greedy")), Error);
  std::printf("60 tokens: %d steps for greedy; lookahead and prompt lookup lanes beside it\n",
              steps);
}

// A session file keeps each pass whole: re-opened without the model, the
// lanes have their strategies and tokens, every record its pass, and
// stepping through it gives each lane's tokens as of each step.
TEST(LookaheadSession, ASessionFileReopensLookaheadAndPromptLookupLanes) {
  const LoadedModel m = test::load_model(test::bundled_model_dir(), "cpu", 6);
  SessionOptions o;
  o.max_new_tokens = 24;
  Session s(m.tokenizer, m.engine, o);
  s.set_prompt("1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,");
  s.set_strategies({SamplingParams{}, parse_strategy("lookahead"),
                    parse_strategy("prompt_lookup=6,2"),
                    parse_strategy("lookahead=3,3,2,top_k=5,seed=7")});
  std::vector<std::vector<std::vector<int>>> live;  // [step][lane]
  const auto note = [&] {
    std::vector<std::vector<int>> lanes;
    for (const Lane& l : s.lanes()) lanes.push_back(l.generated);
    live.push_back(std::move(lanes));
  };
  s.prefill();
  note();
  while (s.can_step()) {
    s.step();
    note();
  }
  const ImportedSession got = import_session_text(session_to_json(s).dump(), "t.json");
  ASSERT_EQ(got.full.lanes.size(), s.lanes().size());
  for (size_t l = 0; l < s.lanes().size(); ++l) {
    EXPECT_EQ(format_strategy(got.full.lanes[l].params), format_strategy(s.lanes()[l].params));
    EXPECT_EQ(got.full.lanes[l].generated, s.lanes()[l].generated) << "lane " << l;
  }
  ASSERT_EQ(got.full.history.size(), s.history().size());
  int passes = 0, multi = 0, sampled = 0;
  for (size_t st = 0; st < s.history().size(); ++st)
    for (size_t k = 0; k < s.history()[st]->lanes.size(); ++k) {
      SCOPED_TRACE("step " + std::to_string(st) + ", record " + std::to_string(k));
      const LaneStep& a = s.history()[st]->lanes[k];
      const LaneStep& b = got.full.history[st]->lanes[k];
      ASSERT_EQ(a.lookahead == nullptr, b.lookahead == nullptr);
      EXPECT_EQ(a.context_ids, b.context_ids);
      EXPECT_EQ(a.chosen_token, b.chosen_token);
      if (!a.lookahead) continue;
      ++passes;
      const LookaheadPass& x = *a.lookahead;
      const LookaheadPass& y = *b.lookahead;
      multi += x.committed.size() > 1;
      sampled += !x.verdict.tried.empty();
      EXPECT_EQ(x.prompt_lookup, y.prompt_lookup);
      EXPECT_EQ(x.start_pos, y.start_pos);
      EXPECT_EQ(x.first_index, y.first_index);
      EXPECT_EQ(x.layout.tokens, y.layout.tokens);
      EXPECT_EQ(x.layout.positions, y.layout.positions);
      EXPECT_EQ(x.layout.mask, y.layout.mask);
      EXPECT_EQ(x.layout.candidates, y.layout.candidates);
      EXPECT_EQ(x.layout.candidate_row, y.layout.candidate_row);
      EXPECT_EQ(x.layout.window_row, y.layout.window_row);
      EXPECT_EQ(x.verdict.committed, y.verdict.committed);
      EXPECT_EQ(x.verdict.matched, y.verdict.matched);
      EXPECT_EQ(x.verdict.candidate, y.verdict.candidate);
      EXPECT_EQ(x.verdict.kept_rows, y.verdict.kept_rows);
      EXPECT_EQ(x.verdict.tried, y.verdict.tried);
      EXPECT_EQ(x.verdict.uniforms, y.verdict.uniforms);
      EXPECT_EQ(x.committed, y.committed);
      EXPECT_EQ(x.window.tokens, y.window.tokens);
      EXPECT_EQ(x.window.changed, y.window.changed);
      EXPECT_EQ(x.window_outputs, y.window_outputs);
      EXPECT_EQ(x.pool_size, y.pool_size);
      EXPECT_EQ(x.new_ngrams, y.new_ngrams);
      EXPECT_EQ(x.slots, y.slots);
      EXPECT_EQ(x.logits, y.logits);
      EXPECT_EQ(x.probs, y.probs);
      EXPECT_EQ(x.cost.flops, y.cost.flops);
    }
  EXPECT_GT(passes, 6);
  EXPECT_GT(multi, 0) << "a counting prompt must let some pass commit several tokens";
  EXPECT_GT(sampled, 0);
  // Each token's log-probability comes from its own row: the summaries match.
  for (int l = 1; l < 4; ++l)
    EXPECT_EQ(summarize_lane(got.full.history, got.full.lanes, l).log_prob,
              summarize_lane(s, l).log_prob)
        << "lane " << l;
  for (int c = 0; c < static_cast<int>(live.size()); ++c) {
    SCOPED_TRACE("cursor " + std::to_string(c));
    const SnapshotPtr snap = replay_snapshot(got, c, 1);
    ASSERT_EQ(snap->lanes.size(), live[c].size());
    for (size_t l = 0; l < snap->lanes.size(); ++l)
      EXPECT_EQ(snap->lanes[l].generated, live[c][l]) << "lane " << l;
  }
}

TEST(LookaheadSession, RefusedWithoutTheKvCache) {
  const LoadedModel m = test::load_model(test::bundled_model_dir(), "cpu", 4);
  SessionOptions o;
  o.kv_cache = false;
  Session s(m.tokenizer, m.engine, o);
  s.set_prompt("Once upon a time");
  s.set_strategies({parse_strategy("lookahead")});
  EXPECT_THROW(s.prefill(), Error);
  EXPECT_EQ(s.state(), SessionState::kReady);
}

}  // namespace session_lanes
}  // namespace
}  // namespace ts
