// The banned-words stage: word lists, the token sequences built from them,
// Hugging Face's NoBadWordsLogitsProcessor rule on hand-built cases, its place
// in the sampling pipeline, and what it does (and does not do) to greedy,
// sampled and beam-search generation in a session.
#include "sampling/banned_words.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "sampling/beam_search.h"
#include "sampling/distribution.h"
#include "sampling/logits_processors.h"
#include "sampling/sampling_pipeline.h"
#include "session/session.h"
#include "test_models.h"
#include "util/error.h"

namespace ts {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << needle;
  }
}

// A list of token sequences as the stage takes it, without a tokenizer.
BannedTokens tokens_of(std::vector<std::vector<int>> sequences) {
  BannedWordList list;
  list.source = "hand-built";
  for (size_t i = 0; i < sequences.size(); ++i) list.entries.push_back(std::to_string(i));
  std::map<std::string, std::vector<int>> by_text;
  for (size_t i = 0; i < sequences.size(); ++i) by_text[std::to_string(i)] = sequences[i];
  // Only the form "as written" maps to the sequence; the others encode to nothing.
  return build_banned_tokens(
      list,
      [&](std::string_view t) {
        auto it = by_text.find(std::string(t));
        return it == by_text.end() ? std::vector<int>{} : it->second;
      },
      1000, 999);
}

std::vector<int> finite_ids(const std::vector<float>& l) {
  std::vector<int> ids;
  for (size_t i = 0; i < l.size(); ++i)
    if (std::isfinite(l[i])) ids.push_back(static_cast<int>(i));
  return ids;
}

// ------------------------------------------------------------------ word lists

TEST(BannedWordList, OneEntryALineWithCommentsAndBlanks) {
  const BannedWordList l = parse_banned_word_list(
      "# a comment\n\nfirst\r\n  two words \n\t# indented comment\nlast", "list.txt");
  EXPECT_EQ(l.source, "list.txt");
  EXPECT_EQ(l.entries, (std::vector<std::string>{"first", "two words", "last"}));
}

TEST(BannedWordList, MalformedListsNameTheFileAndLine) {
  expect_error([] { parse_banned_word_list("", "a.txt"); }, "a.txt: the word list is empty");
  expect_error([] { parse_banned_word_list("# only\n\n  \n", "a.txt"); },
               "a.txt: the word list is empty");
  expect_error([] { parse_banned_word_list("ok\nbad\xff\n", "b.txt"); },
               "b.txt:2: the line is not valid UTF-8");
  expect_error([] { parse_banned_word_list(std::string("ok\nok\nx\0y", 9), "c.txt"); },
               "c.txt:3: the line holds a NUL byte");
  expect_error([] { parse_banned_word_list("a\x01z", "d.txt"); },
               "d.txt:1: the line holds a control character");
  expect_error([] { parse_banned_word_list(std::string(300, 'x'), "e.txt"); },
               "e.txt:1: the entry has 300 bytes");
}

TEST(BannedWordList, FilesThatCannotBeReadAreNamed) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("ts_banned_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  expect_error([&] { read_banned_word_list(dir / "missing.txt"); }, "missing.txt: cannot be read");
  expect_error([&] { read_banned_word_list(dir); }, "is a folder");
  { std::ofstream(dir / "empty.txt"); }
  expect_error([&] { read_banned_word_list(dir / "empty.txt"); },
               "empty.txt: the word list is empty");
  { std::ofstream(dir / "big.txt") << std::string(kMaxBannedListBytes + 10, 'a'); }
  expect_error([&] { read_banned_word_list(dir / "big.txt"); }, "larger than 1 MiB");
  { std::ofstream(dir / "good.txt") << "alpha\n# c\nbeta gamma\n"; }
  const BannedWordList good = read_banned_word_list(dir / "good.txt");
  EXPECT_EQ(good.entries, (std::vector<std::string>{"alpha", "beta gamma"}));
  std::filesystem::remove_all(dir);
}

TEST(BannedWordList, TheShippedListParses) {
  const BannedWordList l =
      read_banned_word_list(std::filesystem::path(TS_SOURCE_DIR) / "assets/banned_words/en.txt");
  EXPECT_EQ(l.entries.size(), 403u);  // naughty-words 1.2.0's en.json, one string a line
}

TEST(BannedWordForms, AsWrittenSpaceCapitalisedLowerDeduplicated) {
  EXPECT_EQ(banned_word_forms("word"),
            (std::vector<std::string>{"word", " word", "Word", " Word"}));
  EXPECT_EQ(banned_word_forms("Two Words"),
            (std::vector<std::string>{"Two Words", " Two Words", "two words", " two words"}));
  EXPECT_EQ(banned_word_forms("mIxed"),
            (std::vector<std::string>{"mIxed", " mIxed", "MIxed", " MIxed", "mixed", " mixed"}));
  // Only ASCII letters change case.
  EXPECT_EQ(banned_word_forms("\xc3\xa9t\xc3\xa9"),
            (std::vector<std::string>{"\xc3\xa9t\xc3\xa9", " \xc3\xa9t\xc3\xa9"}));
}

TEST(BannedTokens, BuiltFromEveryFormDeduplicatedWithoutTheEndOfText) {
  BannedWordList list;
  list.source = "l";
  list.entries = {"ab", "ab", "eos", "c"};
  const std::map<std::string, std::vector<int>> enc = {
      {"ab", {1, 2}}, {" ab", {3, 2}}, {"Ab", {1, 2}}, {" Ab", {4}}, {"eos", {9}}, {" eos", {5, 9}},
      {"Eos", {6}},   {" Eos", {}},    {"c", {7}},     {" c", {7}},  {"C", {8}},   {" C", {8}}};
  const BannedTokens t = build_banned_tokens(
      list, [&](std::string_view s) { return enc.at(std::string(s)); }, 10, 9);
  EXPECT_EQ(t.entries, 4);
  EXPECT_EQ(t.sequences,
            (std::vector<std::vector<int>>{{1, 2}, {3, 2}, {4}, {5, 9}, {6}, {7}, {8}}));
  EXPECT_EQ(t.singles, (std::vector<int>{4, 6, 7, 8}));  // [9] alone is the end of text: dropped
  EXPECT_EQ(t.multi, (std::vector<std::vector<int>>{{1, 2}, {3, 2}, {5, 9}}));
  expect_error(
      [&] {
        build_banned_tokens(
            list, [](std::string_view) { return std::vector<int>{12}; }, 10, 9);
      },
      "outside the vocabulary of 10");
  expect_error(
      [&] {
        build_banned_tokens(
            list, [](std::string_view) { return std::vector<int>{9}; }, 10, 9);
      },
      "no entry gives a token sequence");
}

// ---------------------------------------------------- HF's rule, by hand

TEST(BannedWordsRule, SingleTokenIsBannedAtEveryStepAndNothingElseChanges) {
  const BannedTokens b = tokens_of({{3}});
  for (const std::vector<int>& context :
       std::vector<std::vector<int>>{{0}, {3}, {1, 2, 3}, {5, 5, 5, 5}}) {
    std::vector<float> l = {0.5f, -1.0f, 2.0f, 7.0f, 0.0f, 1.25f};
    const std::vector<float> before = l;
    apply_banned_words(l, b, context);
    for (int i = 0; i < 6; ++i) {
      if (i == 3)
        EXPECT_EQ(l[i], kNegInf);
      else
        EXPECT_EQ(l[i], before[i]) << i;  // bit for bit
    }
  }
}

TEST(BannedWordsRule, MultiTokenBansItsLastTokenOnlyAfterItsPrefix) {
  const BannedTokens b = tokens_of({{4, 5, 6}});
  // Not before the prefix is complete, nor after a different one.
  EXPECT_TRUE(banned_ids_for_context(b, {1, 2, 3}).empty());
  EXPECT_TRUE(banned_ids_for_context(b, {1, 4}).empty());
  EXPECT_TRUE(banned_ids_for_context(b, {1, 5}).empty());
  EXPECT_TRUE(banned_ids_for_context(b, {4, 5, 1}).empty());  // prefix seen earlier, not at the end
  EXPECT_TRUE(banned_ids_for_context(b, {5, 4}).empty());     // the prefix's tokens, wrong order
  // Once the context ends with the prefix: the last token, and only it.
  EXPECT_EQ(banned_ids_for_context(b, {1, 4, 5}), (std::vector<int>{6}));
  EXPECT_EQ(banned_ids_for_context(b, {4, 5, 6, 4, 5}), (std::vector<int>{6}));
  // HF skips a sequence longer than the whole context: a context that is
  // exactly the prefix does not ban.
  EXPECT_TRUE(banned_ids_for_context(b, {4, 5}).empty());
  std::vector<float> l(8, 1.0f);
  apply_banned_words(l, b, {0, 4, 5});
  EXPECT_EQ(finite_ids(l), (std::vector<int>{0, 1, 2, 3, 4, 5, 7}));
}

TEST(BannedWordsRule, HuggingFaceCasesByHand) {
  // bad_words_ids = [[1], [2, 3], [4, 2, 3], [999]] with eos 999: [999] is
  // dropped (generation must be able to end), [1] is static, [2, 3] fires
  // after a 2, [4, 2, 3] after 4 2.
  const BannedTokens b = tokens_of({{1}, {2, 3}, {4, 2, 3}, {999}, {2, 3}});
  EXPECT_EQ(b.sequences.size(), 3u);  // the duplicate [2, 3] and [999] are gone
  EXPECT_EQ(banned_ids_for_context(b, {0}), (std::vector<int>{1}));
  EXPECT_EQ(banned_ids_for_context(b, {0, 2}), (std::vector<int>{1, 3}));
  EXPECT_EQ(banned_ids_for_context(b, {0, 4, 2}), (std::vector<int>{1, 3}));
  EXPECT_EQ(banned_ids_for_context(b, {0, 4}), (std::vector<int>{1}));
  // Two sequences with different last tokens firing at once.
  const BannedTokens c = tokens_of({{7, 8}, {7, 9}, {6, 7, 10}});
  EXPECT_EQ(banned_ids_for_context(c, {6, 7}), (std::vector<int>{8, 9}));  // [6,7,10] is too long
  EXPECT_EQ(banned_ids_for_context(c, {0, 6, 7}), (std::vector<int>{8, 9, 10}));
  // A banned id outside the logits is refused, not written out of bounds.
  std::vector<float> small(2, 0.0f);
  expect_error([&] { apply_banned_words(small, tokens_of({{5}}), {0}); }, "outside the 2 logits");
}

// ------------------------------------------------------------------ pipeline

TEST(BannedWordsStage, IsRecordedAfterTheRepetitionPenaltyAndBeforeTemperature) {
  EXPECT_EQ(stage_index("repetition_penalty"), 1);
  EXPECT_EQ(stage_index("banned_words"), 2);
  EXPECT_EQ(stage_index("temperature"), 3);
  const BannedTokens b = tokens_of({{1}, {0, 3}});
  SamplingParams p = test::sampled(0.7f, 11);
  p.top_k = 3;
  const std::vector<float> l = {1.0f, 4.0f, 2.0f, 3.0f, 0.5f};
  const SamplingRecord r = sample_next(l, {2, 0}, p, 4, &b);
  const StageRecord& st = r.stages[2];
  EXPECT_EQ(st.name, "banned_words");
  EXPECT_TRUE(st.active);
  EXPECT_EQ(st.removed_ids_here, (std::vector<int>{1, 3}));
  EXPECT_EQ(st.removed_here, 2);
  EXPECT_EQ(st.kept, 3);
  // Temperature then sees only the survivors, and top-k 3 keeps all of them.
  EXPECT_EQ(finite_ids(r.stages.back().logits), (std::vector<int>{0, 2, 4}));
  EXPECT_NE(r.draw.chosen_token, 1);
  EXPECT_NE(r.draw.chosen_token, 3);
  // Off: the stage is there, inactive, and changes nothing.
  const SamplingRecord off = sample_next(l, {2, 0}, p, 4);
  EXPECT_FALSE(off.stages[2].active);
  EXPECT_EQ(off.stages[2].logits, off.stages[1].logits);
}

TEST(BannedWordsStage, WithTheRepetitionPenalty) {
  // The penalty runs first (HF's order): token 0 (in the context) is divided
  // by 2, then the ban removes token 2. Greedy takes the best survivor of both.
  SamplingParams g;
  g.repetition_penalty = 2.0f;
  const BannedTokens b = tokens_of({{2}});
  const std::vector<float> l = {4.0f, 3.0f, 5.0f, -1.0f};
  const SamplingRecord r = sample_next(l, {0}, g, 0, &b);
  EXPECT_EQ(r.stages[1].logits, (std::vector<float>{2.0f, 3.0f, 5.0f, -1.0f}));
  EXPECT_EQ(r.stages[2].logits, (std::vector<float>{2.0f, 3.0f, kNegInf, -1.0f}));
  EXPECT_EQ(r.draw.chosen_token, 1);  // without the penalty it would be 0, without the ban 2
  EXPECT_EQ(sample_next(l, {0}, g, 0).draw.chosen_token, 2);
  SamplingParams no_penalty;
  EXPECT_EQ(sample_next(l, {0}, no_penalty, 0, &b).draw.chosen_token, 0);
  // A banned token in the context: the penalty leaves -inf alone and the
  // ban removes the token either way.
  const SamplingRecord again = sample_next(l, {0, 2}, g, 1, &b);
  EXPECT_EQ(again.stages[2].logits[2], kNegInf);
  EXPECT_EQ(again.stages[1].logits[2], 2.5f);
}

TEST(BannedWordsStage, EveryTokenBannedIsRefusedWithoutNaN) {
  const BannedTokens b = tokens_of({{0}, {1}, {2}});
  for (const SamplingParams& p : {SamplingParams{}, test::sampled(1.0f, 3)}) {
    expect_error(
        [&] {
          sample_next({1.0f, 2.0f, 3.0f}, {0}, p, 0, &b);
        },
        "banned words: every token is banned after this context");
  }
  // Tokens already -inf in the raw logits count as gone: one finite token
  // left that the list bans is still "every token".
  expect_error(
      [&] {
        sample_next({kNegInf, 2.0f, kNegInf, kNegInf}, {0}, SamplingParams{}, 0, &b);
      },
      "every token is banned");
  // One survivor: it is chosen, with probability 1.
  const SamplingRecord r =
      sample_next({1.0f, 2.0f, 3.0f, -5.0f}, {0}, test::sampled(1.0f, 3), 0, &b);
  EXPECT_EQ(r.draw.chosen_token, 3);
  EXPECT_EQ(r.draw.chosen_prob, 1.0f);
}

// The stage changes nothing but the banned logits. Greedy: the same token
// whenever the argmax is not banned. Sampling: when the stage removes nothing
// the whole record is identical; when it removes tokens, the distribution is
// the stage-off one renormalised over the survivors (HF: -inf, then softmax),
// so the same random number can land on another token even when the banned
// one would not have been drawn.
TEST(BannedWordsStage, OutputsEqualTheStageOffWheneverNothingBannedWouldBeChosen) {
  std::mt19937 gen(7);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  const BannedTokens b = tokens_of({{3}, {17}, {40}, {5, 6}, {8, 9, 10}});
  int greedy_compared = 0, sampled_identical = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<float> l(64);
    for (float& x : l) x = nd(gen);
    std::vector<int> context = {static_cast<int>(gen() % 64), static_cast<int>(gen() % 64)};
    const std::vector<int> banned = banned_ids_for_context(b, context);
    const SamplingParams g;
    const SamplingRecord off = sample_next(l, context, g, trial);
    const SamplingRecord on = sample_next(l, context, g, trial, &b);
    if (!std::binary_search(banned.begin(), banned.end(), off.draw.chosen_token)) {
      EXPECT_EQ(on.draw.chosen_token, off.draw.chosen_token);
      ++greedy_compared;
    } else {
      EXPECT_NE(on.draw.chosen_token, off.draw.chosen_token);
    }
    // Sampling with only multi-token entries whose prefix the context does
    // not end with: the stage removes nothing and the record is identical.
    const BannedTokens quiet = tokens_of({{63, 62, 61}});
    const SamplingParams s = test::sampled(0.9f, 100 + trial);
    if (banned_ids_for_context(quiet, context).empty()) {
      const SamplingRecord a = sample_next(l, context, s, trial);
      const SamplingRecord c = sample_next(l, context, s, trial, &quiet);
      EXPECT_EQ(c.draw.chosen_token, a.draw.chosen_token);
      EXPECT_EQ(c.draw.chosen_prob, a.draw.chosen_prob);
      EXPECT_EQ(c.final_probs, a.final_probs);
      ++sampled_identical;
    }
    // Sampling with removals: exactly the renormalised stage-off distribution.
    const SamplingRecord a = sample_next(l, context, s, trial);
    const SamplingRecord c = sample_next(l, context, s, trial, &b);
    double removed_mass = 0;
    for (int id : banned) removed_mass += a.final_probs[id];
    for (int i = 0; i < 64; ++i) {
      if (std::binary_search(banned.begin(), banned.end(), i))
        EXPECT_EQ(c.final_probs[i], 0.0f);
      else
        EXPECT_NEAR(c.final_probs[i], a.final_probs[i] / (1.0 - removed_mass), 1e-6);
    }
  }
  EXPECT_GT(greedy_compared, 350);
  EXPECT_GT(sampled_identical, 350);
}

// ------------------------------------------------------------------- beams

TEST(BannedWordsBeams, RemovedTokensAreNeverCandidates) {
  // Two beams over 4 tokens; the best scores belong to token 2, which a
  // logits processor removed from both rows.
  BeamSearchState s = beam_search_start();
  BeamSearchConfig c;
  c.num_beams = 2;
  beam_search_step(s, {log_softmax({1.0f, 2.0f, 0.5f, 0.0f})}, c);
  ASSERT_EQ(s.beams.size(), 2u);
  std::vector<float> r0 = log_softmax({0.0f, 1.0f, 9.0f, 0.5f});
  std::vector<float> r1 = log_softmax({0.5f, 0.0f, 9.0f, 1.0f});
  r0[2] = r1[2] = kNegInf;
  const std::vector<BeamCandidate> cand = beam_search_step(s, {r0, r1}, c);
  for (const BeamCandidate& k : cand) {
    EXPECT_NE(k.token, 2);
    EXPECT_TRUE(std::isfinite(k.sum_log_prob));
  }
  EXPECT_EQ(cand.size(), 4u);
  // Every token of every beam removed: refused, state unchanged.
  const BeamSearchState before = s;
  std::vector<float> none(4, kNegInf);
  expect_error([&] { beam_search_step(s, {none, none}, c); }, "every token of every open beam");
  EXPECT_EQ(s.steps, before.steps);
}

// ----------------------------------------------------------------- sessions

std::shared_ptr<const BannedTokens> session_list(std::vector<std::vector<int>> sequences) {
  return std::make_shared<const BannedTokens>(tokens_of(std::move(sequences)));
}

std::vector<int> generate(const LoadedModel& m, const SamplingParams& p,
                          std::shared_ptr<const BannedTokens> banned, int steps,
                          std::vector<StepTracePtr>* history = nullptr) {
  SessionOptions o;
  o.record_attention = false;
  o.max_new_tokens = steps;
  Session s(m.tokenizer, m.engine, o);
  s.set_strategies({p});
  s.set_banned_words(std::move(banned));
  s.set_prompt("the cat sat on");
  s.run(steps + 1);
  if (history) *history = s.history();
  return s.lanes()[0].generated;
}

TEST(BannedWordsSession, GreedyAvoidsTheBannedTokenAndOtherwiseMatches) {
  const LoadedModel m = test::load_tiny();
  std::vector<StepTracePtr> off_history;
  const std::vector<int> off = generate(m, SamplingParams{}, nullptr, 12, &off_history);
  ASSERT_GE(off.size(), 4u);
  const std::vector<int> prompt = off_history[0]->lanes[0].context_ids;
  ASSERT_NE(prompt.back(), off[0]);  // the phrase below cannot fire at the first step
  // Nothing banned that greedy would choose: identical tokens. Twenty single
  // tokens greedy never chose, and a phrase whose prefix never ends the context.
  std::set<int> used(off.begin(), off.end());
  used.insert(prompt.begin(), prompt.end());
  std::vector<std::vector<int>> unused;
  for (int id = 0; id < m.tokenizer->vocab_size() && unused.size() < 21; ++id)
    if (!used.count(id) && id != m.tokenizer->eot_id()) unused.push_back({id});
  unused.back() = {unused.back()[0], off[0]};
  EXPECT_EQ(generate(m, SamplingParams{}, session_list(unused), 12), off);
  // The phrase (off[0], off[1]): the first token stays, the second cannot
  // follow it, and the trace records the stage at that step only.
  std::vector<StepTracePtr> history;
  const std::vector<int> on =
      generate(m, SamplingParams{}, session_list({{off[0], off[1]}}), 12, &history);
  EXPECT_EQ(on[0], off[0]);
  EXPECT_NE(on[1], off[1]);
  const LaneStep& ls = history[1]->lanes[0];
  ASSERT_TRUE(ls.banned_words);
  const SamplingRecord rec =
      sample_next(ls.logits, ls.context_ids, ls.params, ls.step_index, ls.banned_words.get());
  EXPECT_EQ(rec.stages[2].removed_ids_here, (std::vector<int>{off[1]}));
  EXPECT_EQ(rec.draw.chosen_token, on[1]);
  // Before the prefix (the prefill's choice) the stage removed nothing, and
  // the logits are the stage-off run's: the stage never touches the model.
  const LaneStep& first = history[0]->lanes[0];
  EXPECT_EQ(first.logits, off_history[0]->lanes[0].logits);
  EXPECT_EQ(sample_next(first.logits, first.context_ids, first.params, first.step_index,
                        first.banned_words.get())
                .stages[2]
                .removed_here,
            0);
}

TEST(BannedWordsSession, SampledLanesAndBeamsNeverEmitABannedToken) {
  const LoadedModel m = test::load_tiny(40);
  SamplingParams beams;
  beams.num_beams = 3;
  const std::vector<SamplingParams> strategies = {SamplingParams{}, test::sampled(1.0f, 5),
                                                  test::sampled(1.5f, 9), beams};
  SessionOptions o;
  o.record_attention = false;
  o.max_new_tokens = 16;
  // Stage off: what each lane generates; then ban every token any lane chose
  // at its second position onwards, as single tokens.
  Session off(m.tokenizer, m.engine, o);
  off.set_strategies(strategies);
  off.set_prompt("the cat sat on");
  off.run(17);
  std::vector<std::vector<int>> ban;
  for (const Lane& l : off.lanes())
    for (size_t i = 1; i < l.generated.size(); ++i)
      if (l.generated[i] != m.tokenizer->eot_id()) ban.push_back({l.generated[i]});
  ASSERT_FALSE(ban.empty());
  auto list = session_list(ban);
  Session on(m.tokenizer, m.engine, o);
  on.set_strategies(strategies);
  on.set_banned_words(list);
  on.set_prompt("the cat sat on");
  on.run(17);
  for (const Lane& l : on.lanes()) {
    for (int t : l.generated)
      EXPECT_FALSE(std::binary_search(list->singles.begin(), list->singles.end(), t))
          << "lane " << l.id << " emitted banned token " << t;
    ASSERT_TRUE(l.beam_search() == (l.id == 3));
  }
  // The beam lane considered no banned candidate at any step.
  for (const StepTracePtr& st : on.history()) {
    for (const LaneStep& ls : st->lanes) {
      if (!ls.beam) continue;
      for (const BeamCandidate& c : ls.beam->candidates) {
        EXPECT_FALSE(std::binary_search(list->singles.begin(), list->singles.end(), c.token));
      }
    }
  }
}

TEST(BannedWordsSession, EveryTokenBannedRefusesTheStepAndKeepsTheSession) {
  const LoadedModel m = test::load_tiny();
  SessionOptions o;
  o.record_attention = false;
  Session s(m.tokenizer, m.engine, o);
  s.set_prompt("the cat");
  s.prefill();
  BannedTokens t = tokens_of({{1}});
  t.singles.clear();
  t.sequences.clear();
  for (int id = 0; id < m.tokenizer->vocab_size(); ++id) {
    t.singles.push_back(id);
    t.sequences.push_back({id});
  }
  s.set_banned_words(std::make_shared<const BannedTokens>(t));
  const std::vector<int> before = s.lanes()[0].generated;
  const size_t steps = s.history().size();
  expect_error([&] { s.step(); }, "every token is banned");
  EXPECT_EQ(s.lanes()[0].generated, before);
  EXPECT_EQ(s.history().size(), steps);
  s.set_banned_words(nullptr);  // switched off: the same session steps on
  EXPECT_NO_THROW(s.step());
}

// ------------------------------------------------------ the classroom check

namespace classroom {

// Everyday prompts a teacher might type in front of a class.
const std::vector<std::string> kPrompts = {"The teacher told the class",
                                           "My favourite animal is",
                                           "After school we went to",
                                           "The best thing about summer is",
                                           "Yesterday my friend said",
                                           "In the library I found",
                                           "The science experiment showed that",
                                           "Our class trip to the museum",
                                           "When I grow up I want to",
                                           "The weather today is",
                                           "My family likes to",
                                           "The story begins with a boy who",
                                           "At lunch time we",
                                           "The new student in our class",
                                           "On the playground",
                                           "My homework is about",
                                           "The principal announced that",
                                           "During the football game",
                                           "Once upon a time there was a",
                                           "The most important rule in our school is"};
constexpr int kSeeds = 50;
constexpr int kTokens = 40;

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

bool word_char(unsigned char c) { return std::isalnum(c) || c >= 0x80; }

// Indices of the list entries that occur in `text` as whole words or phrases
// (case-insensitive: neither neighbour is a letter or digit).
std::vector<int> listed_in(const std::string& text, const std::vector<std::string>& entries) {
  const std::string t = lower(text);
  std::vector<int> found;
  for (size_t e = 0; e < entries.size(); ++e) {
    const std::string w = lower(entries[e]);
    for (size_t at = t.find(w); at != std::string::npos; at = t.find(w, at + 1)) {
      const bool left = at == 0 || !word_char(t[at - 1]) || !word_char(w.front());
      const bool right =
          at + w.size() == t.size() || !word_char(t[at + w.size()]) || !word_char(w.back());
      if (left && right) {
        found.push_back(static_cast<int>(e));
        break;
      }
    }
  }
  return found;
}

struct Tally {
  int continuations = 0;
  int with_listed = 0;
  std::map<int, int> entries;  // list line (1-based) -> continuations containing it
};

// Samples kSeeds continuations of every prompt at temperature 1, kTokens
// tokens each, eight seeds at a time as the lanes of one session (one
// batched forward per step), and checks each prompt + continuation.
Tally sample_all(const LoadedModel& m, std::shared_ptr<const BannedTokens> banned,
                 const std::vector<std::string>& entries) {
  Tally tally;
  SessionOptions o;
  o.record_attention = false;
  o.record_residuals = false;
  o.max_new_tokens = kTokens;
  for (const std::string& prompt : kPrompts) {
    EXPECT_TRUE(listed_in(prompt, entries).empty()) << "a prompt holds a listed word";
    for (int first = 0; first < kSeeds; first += kMaxLanes) {
      std::vector<SamplingParams> lanes;
      for (int seed = first; seed < std::min(kSeeds, first + kMaxLanes); ++seed)
        lanes.push_back(test::sampled(1.0f, static_cast<uint64_t>(seed) + 1));
      Session s(m.tokenizer, m.engine, o);
      s.set_strategies(lanes);
      s.set_banned_words(banned);
      s.set_prompt(prompt);
      s.run(kTokens + 1);
      for (const Lane& lane : s.lanes()) {
        EXPECT_TRUE(lane.generated.size() == static_cast<size_t>(kTokens) ||
                    lane.generated.back() == m.tokenizer->eot_id());
        std::vector<int> ids = lane.generated;
        if (!ids.empty() && ids.back() == m.tokenizer->eot_id()) ids.pop_back();
        const std::vector<int> hits = listed_in(prompt + m.tokenizer->decode(ids), entries);
        ++tally.continuations;
        tally.with_listed += hits.empty() ? 0 : 1;
        for (int e : hits) ++tally.entries[e + 1];
      }
    }
  }
  return tally;
}

LoadedModel bundled_model() {
  ModelSetupOptions o;  // no --model: the bundled model
  o.device = "cpu";
  o.cache_sequences = kMaxLanes + 2;
  return load_model_setup(o);
}

std::filesystem::path shipped_list() {
  return std::filesystem::path(TS_SOURCE_DIR) / "assets/banned_words/en.txt";
}

void print(const char* what, const Tally& t) {
  std::printf("%s: %d of %d continuations (%.2f%%) contain a listed word", what, t.with_listed,
              t.continuations, 100.0 * t.with_listed / t.continuations);
  // Line numbers in the list, not the words, to keep the log clean.
  if (!t.entries.empty()) std::printf("; list lines (continuations):");
  for (const auto& [line, n] : t.entries) std::printf(" %d (%d)", line, n);
  std::printf("\n");
}

}  // namespace classroom

// 20 classroom prompts x 50 seeds at temperature 1, 40 tokens each, from the
// bundled model with the shipped list on: no listed word or phrase in the
// decoded text (case-insensitive, whole words).
TEST(Classroom, NoListedWordInAThousandSampledContinuations) {
  const LoadedModel m = classroom::bundled_model();
  const BannedWordList list = read_banned_word_list(classroom::shipped_list());
  auto banned = std::make_shared<const BannedTokens>(build_banned_tokens(
      list, [&](std::string_view t) { return m.tokenizer->encode_ids(t); },
      m.tokenizer->vocab_size(), m.tokenizer->eot_id()));
  // The checker finds what it is meant to find.
  EXPECT_EQ(classroom::listed_in("He said Anus.", list.entries).size(), 1u);
  EXPECT_TRUE(classroom::listed_in("the janus head", list.entries).empty());
  const classroom::Tally t = classroom::sample_all(m, banned, list.entries);
  classroom::print("stage on", t);
  EXPECT_EQ(t.continuations, 1000);
  EXPECT_EQ(t.with_listed, 0);
}

// Where a removed token is listed, it is masked: leading whitespace and a
// first ASCII letter or digit kept, later letters and digits and every
// non-ASCII character starred, punctuation kept, a byte-level fragment of a
// character one star.
TEST(BannedWords, MaskKeepsTheSpaceAndFirstLetterAndStarsTheRest) {
  EXPECT_EQ(mask_banned_piece(" damn"), " d***");
  EXPECT_EQ(mask_banned_piece("Damn"), "D***");
  EXPECT_EQ(mask_banned_piece("\n\tab"), "\n\ta*");
  EXPECT_EQ(mask_banned_piece(" f-ing"), " f-***");
  EXPECT_EQ(mask_banned_piece("x"), "x");
  EXPECT_EQ(mask_banned_piece(" "), " ");
  EXPECT_EQ(mask_banned_piece(""), "");
  EXPECT_EQ(mask_banned_piece("...a"), "...a");             // the first word character is kept
  EXPECT_EQ(mask_banned_piece(" na\xC3\xAFve"), " n****");  // "ï" is one character
  EXPECT_EQ(mask_banned_piece("\xC3\xA9t\xC3"), "***");     // a cut-off sequence: one star
  EXPECT_EQ(mask_banned_piece(" \xF0\x9F\x96\x95"), " *");  // an emoji word is starred whole
  // Every entry of the shipped list, as a token with a leading space, keeps
  // at most its first ASCII character readable.
  const BannedWordList list =
      read_banned_word_list(std::filesystem::path(TS_SOURCE_DIR) / "assets/banned_words/en.txt");
  for (const std::string& e : list.entries) {
    const std::string m = mask_banned_piece(" " + e);
    size_t readable = 0;
    for (unsigned char c : m) {
      EXPECT_LT(c, 0x80) << e << " -> " << m;
      readable += std::isalnum(c) != 0;
    }
    EXPECT_LE(readable, 1u) << e << " -> " << m;
  }
}

// The same measurement with the stage off (not a pass/fail check: the rate
// the stage brings to zero). Run it with
//   build/ts_tests --gtest_also_run_disabled_tests
//     --gtest_filter='Classroom.DISABLED_RateWithTheStageOff'
TEST(Classroom, DISABLED_RateWithTheStageOff) {
  const LoadedModel m = classroom::bundled_model();
  const BannedWordList list = read_banned_word_list(classroom::shipped_list());
  classroom::print("stage off", classroom::sample_all(m, nullptr, list.entries));
}

}  // namespace
}  // namespace ts
