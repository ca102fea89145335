// Scoring a given text: each continuation token's probability, rank and
// alternatives must be the model's at that position. Checked against the
// PyTorch reference logits of the tiny fixture model and against the
// engine's own step-by-step decode with the KV cache (an independent path:
// one token per forward, not one prefill), with the softmax recomputed here.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/token_display.h"
#include "session/model_setup.h"
#include "session/score.h"
#include "test_models.h"
#include "test_paths.h"
#include "util/error.h"

namespace ts {
namespace {

// Probabilities of one row of logits, computed in long double.
std::vector<long double> softmax_ld(const float* row, int v) {
  long double mx = row[0];
  for (int j = 1; j < v; ++j) mx = std::max(mx, static_cast<long double>(row[j]));
  long double sum = 0;
  std::vector<long double> p(v);
  for (int j = 0; j < v; ++j) sum += (p[j] = std::exp(static_cast<long double>(row[j]) - mx));
  for (long double& x : p) x /= sum;
  return p;
}

int rank_of(const std::vector<long double>& p, int id) {
  int r = 1;
  for (long double x : p) r += x > p[id];
  return r;
}

// The checks shared by both references: `rows[i]` is the model's logits row
// that predicts scored token i.
void expect_matches_rows(const ScoreResult& s, const std::vector<std::vector<float>>& rows,
                         double tolerance) {
  ASSERT_EQ(s.scored.size(), rows.size());
  long double total = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const ScoredToken& t = s.scored[i];
    const int v = static_cast<int>(rows[i].size());
    const std::vector<long double> p = softmax_ld(rows[i].data(), v);
    SCOPED_TRACE("scored token " + std::to_string(i) + " '" + t.text + "'");
    EXPECT_NEAR(t.probability, static_cast<double>(p[t.id]), tolerance);
    EXPECT_NEAR(t.log_prob, static_cast<double>(std::log(p[t.id])), tolerance / p[t.id]);
    EXPECT_NEAR(t.surprisal_bits, static_cast<double>(-std::log2(p[t.id])),
                tolerance / p[t.id] / std::log(2.0));
    EXPECT_EQ(t.rank, rank_of(p, t.id));
    ASSERT_EQ(t.top.size(), 5u);
    for (size_t k = 0; k < t.top.size(); ++k) {
      EXPECT_NEAR(t.top[k].probability, static_cast<double>(p[t.top[k].id]), tolerance);
      EXPECT_EQ(rank_of(p, t.top[k].id), static_cast<int>(k) + 1) << "alternative " << k;
    }
    total += std::log(p[t.id]);
  }
  EXPECT_NEAR(s.total_log_prob, static_cast<double>(total), 1e-4);
  EXPECT_NEAR(s.perplexity, static_cast<double>(std::exp(-total / rows.size())),
              1e-4 * s.perplexity);
}

nlohmann::json tiny_reference_case() {
  std::ifstream in(test::fixture_dir() / "tiny/reference.json");
  return nlohmann::json::parse(in)["cases"][0];
}

std::vector<std::vector<float>> reference_rows(const nlohmann::json& c, int first, int last) {
  std::vector<std::vector<float>> rows;
  for (int pos = first; pos <= last; ++pos)
    rows.push_back(c["logits"][pos - 1].get<std::vector<float>>());  // row pos-1 predicts pos
  return rows;
}

TEST(Score, ContinuationProbabilitiesEqualPyTorchLogits) {
  LoadedModel m = test::load_tiny();
  const nlohmann::json c = tiny_reference_case();
  ASSERT_EQ(c["prompt"], "The cat sat on the mat.");
  const std::vector<int> ids = c["token_ids"].get<std::vector<int>>();
  const ScoreResult s = score_text(*m.engine, *m.tokenizer, "The cat sat on the", " mat.");
  // The prompt and the continuation tokenized alone give the reference's tokens.
  ASSERT_EQ(s.tokens, ids);
  ASSERT_EQ(s.context_tokens, 6);
  expect_matches_rows(s, reference_rows(c, 6, static_cast<int>(ids.size()) - 1), 1e-5);
  // Byte spans are in the continuation and cover it.
  EXPECT_EQ(s.scored.front().byte_begin, 0u);
  EXPECT_EQ(s.scored.back().byte_end, std::string(" mat.").size());
}

TEST(Score, WholeTextScoresEveryTokenAfterTheFirst) {
  LoadedModel m = test::load_tiny();
  const nlohmann::json c = tiny_reference_case();
  const std::vector<int> ids = c["token_ids"].get<std::vector<int>>();
  const ScoreResult s = score_text(*m.engine, *m.tokenizer, "", "The cat sat on the mat.");
  ASSERT_EQ(s.tokens, ids);
  EXPECT_EQ(s.context_tokens, 1);
  expect_matches_rows(s, reference_rows(c, 1, static_cast<int>(ids.size()) - 1), 1e-5);
}

TEST(Score, BundledModelEqualsStepByStepDecodeAndLeavesTheCache) {
  ModelSetupOptions o;
  o.device = "cpu";
  o.cpu_threads = 2;
  LoadedModel m = load_model_setup(o);  // the bundled model
  const std::string prompt = "Today's weather is so", cont = " warm and sunny that we went out.";
  const KvOccupancy before = m.engine->cache().occupancy();
  const ScoreResult s = score_text(*m.engine, *m.tokenizer, prompt, cont);
  EXPECT_EQ(m.engine->cache().occupancy().blocks_used, before.blocks_used);
  // Independent path: the prompt's prefill, then one cached decode step per
  // continuation token; each step's last-row logits predict the next token.
  std::vector<int> p = m.tokenizer->encode_ids(prompt);
  const std::vector<int> c = m.tokenizer->encode_ids(cont);
  ASSERT_EQ(s.context_tokens, static_cast<int>(p.size()));
  ASSERT_EQ(s.scored.size(), c.size());
  const SeqId seq = m.engine->cache().create();
  std::vector<std::vector<float>> rows;
  ForwardResult r = m.engine->forward({{seq, p}}, ForwardOptions{});
  rows.push_back(r.outputs[0].logits);
  for (size_t i = 0; i + 1 < c.size(); ++i) {
    r = m.engine->forward({{seq, {c[i]}}}, ForwardOptions{});
    rows.push_back(r.outputs[0].logits);
  }
  m.engine->cache().release(seq);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_EQ(s.scored[i].id, c[i]);
  expect_matches_rows(s, rows, 1e-5);
}

TEST(Score, PartialUtf8TokensShowValidTextAndCoverTheBytes) {
  LoadedModel m = test::load_tiny();
  const std::string cont = " \xF0\x9F\x99\x82 ok \xC3\xA9t\xC3\xA9";  // " 🙂 ok été"
  const ScoreResult s = score_text(*m.engine, *m.tokenizer, "The cat", cont);
  std::string joined;
  bool some_partial = false;
  size_t expected_begin = 0;
  for (const ScoredToken& t : s.scored) {
    EXPECT_TRUE(is_complete_utf8(t.text)) << t.text;
    EXPECT_EQ(t.byte_begin, expected_begin);
    EXPECT_EQ(cont.substr(t.byte_begin, t.byte_end - t.byte_begin), t.bytes);
    expected_begin = t.byte_end;
    some_partial = some_partial || !is_complete_utf8(t.bytes);
    joined += t.bytes;
    for (const ScoreAlternative& a : t.top) EXPECT_TRUE(is_complete_utf8(a.text));
  }
  EXPECT_EQ(joined, cont);
  // The tiny vocabulary has no emoji token: the emoji is split into byte
  // tokens, so the test really covers partial characters.
  EXPECT_TRUE(some_partial);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Score, BadInputGivesOneLineAndChangesNothing) {
  LoadedModel m = test::load_tiny();
  Engine& e = *m.engine;
  const Tokenizer& tok = *m.tokenizer;
  const KvOccupancy before = e.cache().occupancy();
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += " the cat";  // 80 tokens > n_ctx 64
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"empty", [&] { score_text(e, tok, "The cat", ""); }},
      {"nothing to predict", [&] { score_text(e, tok, "", "The"); }},
      {"longer than the model's context of 64", [&] { score_text(e, tok, "The", long_text); }},
      {"longer than the model's context of 64", [&] { score_text(e, tok, "", long_text); }},
      {"1..100", [&] { score_text(e, tok, "The", " cat", 0); }},
  };
  for (const auto& [expected, f] : cases) {
    const std::string msg = error_of(f);
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(e.cache().occupancy().blocks_used, before.blocks_used);
  }
  // Exactly the context fits.
  std::string fits = "The";
  while (tok.encode_ids(fits).size() < 63) fits += " cat";
  if (tok.encode_ids(fits).size() == 63) fits += ".";
  ASSERT_EQ(tok.encode_ids(fits).size(), 64u);
  EXPECT_EQ(score_text(e, tok, "", fits).scored.size(), 63u);
  EXPECT_NE(error_of([&] { score_text(e, tok, "", fits + "."); }).find("65 tokens"),
            std::string::npos);
}

TEST(Score, FirstDifferenceOfTwoContinuations) {
  LoadedModel m = test::load_tiny();
  const ScoreResult a = score_text(*m.engine, *m.tokenizer, "The cat sat on", " the mat");
  const ScoreResult b = score_text(*m.engine, *m.tokenizer, "The cat sat on", " the idea");
  ASSERT_EQ(a.scored[0].id, b.scored[0].id);
  EXPECT_DOUBLE_EQ(a.scored[0].probability, b.scored[0].probability);  // same context, same row
  const ScoreDifference d = first_difference(a, b);
  EXPECT_TRUE(d.same_context);
  ASSERT_EQ(d.index, 1);
  ASSERT_TRUE(d.a && d.b);
  EXPECT_EQ(d.a, &a.scored[1]);
  EXPECT_EQ(d.b, &b.scored[1]);
  EXPECT_NE(d.a->id, d.b->id);
  // A prefix: they part where the shorter ends.
  const ScoreResult c = score_text(*m.engine, *m.tokenizer, "The cat sat on", " the");
  const ScoreDifference p = first_difference(a, c);
  EXPECT_EQ(p.index, 1);
  EXPECT_EQ(p.a, &a.scored[1]);
  EXPECT_EQ(p.b, nullptr);
  EXPECT_EQ(first_difference(a, a).index, -1);
  const nlohmann::json j = score_comparison_to_json(a, b);
  EXPECT_EQ(j["first_difference"]["index"], 1);
  EXPECT_DOUBLE_EQ(j["first_difference"]["b"]["probability"].get<double>(), d.b->probability);
}

}  // namespace
}  // namespace ts
