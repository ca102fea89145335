// DoLa: the candidate-layer rule, the divergence, the relative-top filter,
// the strategy strings, and the session's DoLa lanes against an independent
// PyTorch reference (tools/reference/dola_reference.py: full forward passes,
// no KV cache, float64).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/logit_lens.h"
#include "sampling/distribution.h"
#include "sampling/dola.h"
#include "sampling/sampling_params.h"
#include "sampling/sampling_pipeline.h"
#include "session/dola_lane.h"
#include "session/model_setup.h"
#include "session/session.h"
#include "test_models.h"
#include "test_paths.h"
#include "util/error.h"

namespace ts {
namespace {

LoadedModel bundled() {
  return test::load_model(std::filesystem::path(TS_SOURCE_DIR) / "assets/models/tokenscope-tiny");
}

std::unique_ptr<Session> make_session(const LoadedModel& m, const std::string& prompt,
                                      const std::vector<SamplingParams>& lanes, int max_new,
                                      SessionOptions o = {}) {
  o.max_new_tokens = max_new;
  auto s = std::make_unique<Session>(m.tokenizer, m.engine, o);
  s->set_prompt(prompt);
  s->set_strategies(lanes);
  return s;
}

std::vector<int> layers(DolaMode mode, int n, bool tied = true) {
  return dola_candidate_layers(mode, {}, n, tied);
}

// ---- the candidate-layer rule ----

TEST(DolaLayers, HuggingFaceRuleForModelDepths) {
  using V = std::vector<int>;
  // Tied embeddings: "low" starts at 2; both halves of a 4-layer model give [2].
  EXPECT_EQ(layers(DolaMode::kLow, 4), V({2}));
  EXPECT_EQ(layers(DolaMode::kHigh, 4), V({2}));
  EXPECT_EQ(layers(DolaMode::kLow, 12), V({2, 4}));
  EXPECT_EQ(layers(DolaMode::kHigh, 12), V({6, 8, 10}));
  EXPECT_EQ(layers(DolaMode::kLow, 24), V({2, 4, 6, 8, 10}));
  EXPECT_EQ(layers(DolaMode::kHigh, 24), V({12, 14, 16, 18, 20, 22}));
  // More than 40 layers: the first / last 20 only.
  EXPECT_EQ(layers(DolaMode::kLow, 48), V({2, 4, 6, 8, 10, 12, 14, 16, 18}));
  EXPECT_EQ(layers(DolaMode::kHigh, 48), V({28, 30, 32, 34, 36, 38, 40, 42, 44, 46}));
  EXPECT_EQ(layers(DolaMode::kLow, 40), V({2, 4, 6, 8, 10, 12, 14, 16, 18}));
  EXPECT_EQ(layers(DolaMode::kHigh, 40), V({20, 22, 24, 26, 28, 30, 32, 34, 36, 38}));
  // Shallow models: a 2-layer model starts at 1, a 1-layer one at 0.
  EXPECT_EQ(layers(DolaMode::kLow, 2), V({1}));
  EXPECT_EQ(layers(DolaMode::kHigh, 2), V({1}));
  EXPECT_EQ(layers(DolaMode::kLow, 1), V({0}));
  EXPECT_EQ(layers(DolaMode::kHigh, 1), V({0}));
  // Untied embeddings start at the embedding output.
  EXPECT_EQ(layers(DolaMode::kLow, 12, false), V({0, 2, 4}));
  EXPECT_EQ(layers(DolaMode::kLow, 4, false), V({0}));
  EXPECT_EQ(layers(DolaMode::kLow, 48, false), V({0, 2, 4, 6, 8, 10, 12, 14, 16, 18}));
}

// A lane takes the rule for its model's embeddings: a Llama-family model
// with an untied lm_head starts "low" at the embedding output, a tied one at 2.
TEST(DolaLayers, ALaneUsesItsModelsTiedOrUntiedHead) {
  SamplingParams p;
  p.dola_mode = DolaMode::kLow;
  ModelConfig untied;
  untied.n_layer = 12;
  untied.tied_embeddings = false;
  EXPECT_EQ(dola_layers_for(p, untied), std::vector<int>({0, 2, 4}));
  ModelConfig tied = untied;
  tied.tied_embeddings = true;
  EXPECT_EQ(dola_layers_for(p, tied), std::vector<int>({2, 4}));
}

TEST(DolaLayers, ExplicitListsAreCheckedAgainstTheModel) {
  EXPECT_EQ(dola_candidate_layers(DolaMode::kLayers, {3, 0, 1}, 4), std::vector<int>({3, 0, 1}));
  EXPECT_THROW(dola_candidate_layers(DolaMode::kLayers, {4}, 4), Error);  // the final layer
  EXPECT_THROW(dola_candidate_layers(DolaMode::kLayers, {-1}, 4), Error);
  EXPECT_THROW(dola_candidate_layers(DolaMode::kLayers, {1, 1}, 4), Error);
  EXPECT_THROW(dola_candidate_layers(DolaMode::kLayers, {}, 4), Error);
  EXPECT_THROW(dola_candidate_layers(DolaMode::kOff, {}, 4), Error);
  EXPECT_THROW(dola_candidate_layers(DolaMode::kLow, {}, 0), Error);
  // A 3-layer model: the lower half (layer 1) is below layer 2, where the
  // tied rule starts, so "low" picks nothing, and says so in one line.
  try {
    layers(DolaMode::kLow, 3);
    FAIL() << "dola=low on 3 layers was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find("picks no layer for a 3-layer model"), std::string::npos) << what;
  }
  EXPECT_EQ(layers(DolaMode::kHigh, 3), std::vector<int>({1}));
  try {
    dola_candidate_layers(DolaMode::kLayers, {2, 7}, 4);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("layer 7"), std::string::npos) << e.what();
  }
}

// ---- the arithmetic ----

TEST(DolaMath, DivergenceIsHuggingFacesSummedOverTheVocabulary) {
  // P = (1/4, 3/4), Q = (3/4, 1/4), M = (1/2, 1/2):
  // KL(M||P) = KL(M||Q) = 0.5 ln(4/3), so the divergence is 0.5 ln(4/3).
  const std::vector<float> p = {0.0f, std::log(3.0f)}, q = {std::log(3.0f), 0.0f};
  EXPECT_NEAR(dola_divergence(p, q), 0.5 * std::log(4.0 / 3.0), 1e-7);
  EXPECT_NEAR(dola_divergence(p, p), 0.0, 1e-12);
  // Not the textbook JSD (0.5 KL(P||M) + 0.5 KL(Q||M)) on an asymmetric pair.
  const std::vector<float> a = {0.0f, 2.0f, -1.0f}, b = {1.0f, -3.0f, 0.5f};
  const std::vector<float> pa = softmax(a), pb = softmax(b);
  double hf = 0, textbook = 0;
  for (int i = 0; i < 3; ++i) {
    const double m = 0.5 * (pa[i] + pb[i]);
    hf += 0.5 * (m * std::log(m / pa[i]) + m * std::log(m / pb[i]));
    textbook += 0.5 * (pa[i] * std::log(pa[i] / m) + pb[i] * std::log(pb[i] / m));
  }
  EXPECT_NEAR(dola_divergence(a, b), hf, 1e-6);
  EXPECT_GT(std::abs(hf - textbook), 1e-3);
  EXPECT_THROW(dola_divergence(a, {1.0f}), Error);
}

TEST(DolaMath, RelativeTopFilterAndContrast) {
  // p_final = (0.5, 0.06, 0.04, 0.4): 0.04 < 0.1 * 0.5 is dropped.
  const std::vector<float> pf = {0.5f, 0.06f, 0.04f, 0.4f};
  const std::vector<float> pq = {0.7f, 0.01f, 0.09f, 0.2f};
  std::vector<float> lf, lq;
  for (float x : pf) lf.push_back(std::log(x));
  for (float x : pq) lq.push_back(std::log(x) + 3.0f);  // a shift: logits, not log-probs
  const std::vector<float> c = dola_contrast(lf, lq);
  EXPECT_NEAR(c[0], std::log(0.5 / 0.7), 1e-5);
  EXPECT_NEAR(c[1], std::log(0.06 / 0.01), 1e-5);
  EXPECT_TRUE(std::isinf(c[2]) && c[2] < 0);
  EXPECT_NEAR(c[3], std::log(0.4 / 0.2), 1e-5);
  // The filter keeps a token just above 0.1 * max, drops one just below.
  const std::vector<float> edge = {std::log(1.0f), std::log(0.1001f), std::log(0.0999f)};
  const std::vector<float> ce = dola_contrast(edge, edge);
  EXPECT_TRUE(std::isfinite(ce[0]) && std::isfinite(ce[1]));
  EXPECT_TRUE(std::isinf(ce[2]));

  // One step: the contrast promotes token 1 (rare early, likely late) over
  // the final layer's favourite token 0.
  const DolaStep step = dola_step(lf, {2}, {lq});
  EXPECT_EQ(step.premature_layer, 2);
  EXPECT_EQ(step.divergence, std::vector<float>({0.0f}));  // one candidate: not computed
  EXPECT_EQ(step.kept, 3);
  ASSERT_EQ(step.top.size(), 3u);
  EXPECT_EQ(step.top[0].token, 1);
  EXPECT_EQ(step.top[0].final_rank, 2);
  EXPECT_NEAR(step.top[0].final_logp, std::log(0.06), 1e-5);
  EXPECT_NEAR(step.top[0].premature_logp, std::log(0.01), 1e-5);
  EXPECT_EQ(step.top[2].token, 0);
  EXPECT_EQ(step.top[2].final_rank, 0);
}

TEST(DolaMath, PrematureLayerIsTheMostDivergentCandidate) {
  const std::vector<float> final_logits = {2.0f, 0.0f, -1.0f};
  const std::vector<float> near = {1.9f, 0.1f, -1.0f}, far = {-1.0f, 0.0f, 2.0f};
  const DolaStep step = dola_step(final_logits, {1, 3, 5}, {near, far, far});
  EXPECT_EQ(step.premature_layer, 3);  // the first of the two equal maxima
  ASSERT_EQ(step.divergence.size(), 3u);
  EXPECT_GT(step.divergence[1], step.divergence[0]);
  EXPECT_EQ(step.divergence[1], step.divergence[2]);
  EXPECT_THROW(dola_step(final_logits, {1, 2}, {near}), Error);
  EXPECT_THROW(dola_step(final_logits, {}, {}), Error);
}

// ---- strategy strings ----

TEST(DolaStrategy, ParsesFormatsAndDescribes) {
  SamplingParams p = parse_strategy("dola=low");
  EXPECT_EQ(p.dola_mode, DolaMode::kLow);
  EXPECT_FALSE(p.do_sample);
  EXPECT_EQ(format_strategy(p), "dola=low");
  EXPECT_EQ(describe(p), "DoLa low");
  p = parse_strategy("dola=2,3, 0 ,repetition_penalty=1.2");
  EXPECT_EQ(p.dola_mode, DolaMode::kLayers);
  EXPECT_EQ(p.dola_layers, std::vector<int>({2, 3, 0}));
  EXPECT_EQ(p.repetition_penalty, 1.2f);
  EXPECT_EQ(format_strategy(p), "dola=2,3,0,repetition_penalty=1.2");
  EXPECT_EQ(describe(p), "DoLa 2,3,0 \u00b7 rep 1.2");
  p = parse_strategy("dola=high,top_p=0.9,seed=3");
  EXPECT_TRUE(p.do_sample);
  EXPECT_EQ(format_strategy(p), "dola=high,top_p=0.9,seed=3");
  EXPECT_EQ(describe(p), "DoLa high \u00b7 top-p 0.9 \u00b7 seed 3");
  p = parse_strategy("dola=low,sample");
  EXPECT_EQ(format_strategy(p), "dola=low,sample");
  EXPECT_EQ(parse_strategy("greedy,dola=1"), parse_strategy("dola=1"));
  for (const char* s : {"dola=low", "dola=2,3,0,repetition_penalty=1.2", "dola=high,top_p=0.9",
                        "dola=low,sample", "dola=1,temperature=0.7,seed=9"})
    EXPECT_EQ(parse_strategy(format_strategy(parse_strategy(s))), parse_strategy(s)) << s;
}

TEST(DolaStrategy, BadStringsAreRefusedWithOneLine) {
  for (const char* s :
       {"dola", "dola=", "dola=middle", "dola=-1", "dola=2,2", "dola=1.5", "dola=low,3",
        "dola=low,beams=4", "dola=low,contrastive=4", "dola=low,dola=high", "dola=2,x"}) {
    try {
      parse_strategy(s);
      ADD_FAILURE() << s << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << s;
    }
  }
  SamplingParams p;
  p.dola_layers = {1};  // layers without DoLa
  EXPECT_THROW(p.validate(), Error);
  p.dola_mode = DolaMode::kLow;  // a list with "low"
  EXPECT_THROW(p.validate(), Error);
}

// ---- the session's DoLa lanes against the reference ----

void check_against_reference(const LoadedModel& m, const std::string& file) {
  std::ifstream in(test::fixture_dir() / "dola" / file);
  const auto ref = nlohmann::json::parse(in);
  const std::string prompt = ref["prompt"].get<std::string>();
  ASSERT_EQ(m.tokenizer->encode_ids(prompt), ref["prompt_ids"].get<std::vector<int>>());
  ASSERT_EQ(ref["n_layer"].get<int>(), m.engine->config().n_layer);
  ASSERT_GE(ref["runs"].size(), 4u);
  bool exercised_selection = false;
  for (const auto& run : ref["runs"]) {
    SamplingParams p;
    if (run["layers"].is_string()) {
      p.dola_mode = run["layers"] == "low" ? DolaMode::kLow : DolaMode::kHigh;
    } else {
      p.dola_mode = DolaMode::kLayers;
      p.dola_layers = run["layers"].get<std::vector<int>>();
    }
    p.repetition_penalty = run["repetition_penalty"].get<float>();
    SCOPED_TRACE(file + " " + format_strategy(p));
    const std::vector<int> candidates = run["candidates"].get<std::vector<int>>();
    auto s = make_session(m, prompt, {p}, ref["max_new_tokens"].get<int>());
    s->run(1000);
    const std::vector<int> tokens = run["tokens"].get<std::vector<int>>();
    ASSERT_GE(tokens.size(), 30u);
    ASSERT_EQ(s->lanes()[0].generated, tokens);
    for (size_t step = 0; step < tokens.size(); ++step) {
      const LaneStep* r = s->record(static_cast<int>(step), 0);
      ASSERT_TRUE(r && r->dola) << "step " << step;
      const DolaStep& d = *r->dola;
      EXPECT_EQ(d.candidate_layers, candidates);
      EXPECT_EQ(d.premature_layer, run["premature"][step].get<int>()) << "step " << step;
      if (candidates.size() > 1 && d.premature_layer != candidates[0]) exercised_selection = true;
      ASSERT_EQ(d.divergence.size(), candidates.size());
      for (size_t i = 0; i < candidates.size(); ++i)
        EXPECT_NEAR(d.divergence[i], run["divergence"][step][i].get<double>(), 1e-4)
            << "step " << step << " layer " << candidates[i];
      EXPECT_EQ(d.kept, run["kept"][step].get<int>()) << "step " << step;
      if (step >= run["steps"].size()) continue;
      const auto& kept = run["steps"][step];
      ASSERT_EQ(d.top.size(), std::min<size_t>(kept.size(), kDolaTopTokens));
      for (size_t i = 0; i < d.top.size(); ++i) {
        EXPECT_EQ(d.top[i].token, kept[i][0].get<int>()) << "step " << step << " rank " << i;
        EXPECT_NEAR(d.top[i].final_logp, kept[i][1].get<double>(), 1e-4);
        EXPECT_NEAR(d.top[i].premature_logp, kept[i][2].get<double>(), 1e-4);
        EXPECT_NEAR(d.top[i].contrast, kept[i][3].get<double>(), 1e-4);
      }
    }
  }
  EXPECT_TRUE(exercised_selection) << "no run picked a premature layer other than its first";
}

TEST(DolaLane, MatchesReferenceOnFixtureModel) {
  check_against_reference(test::load_tiny(), "tiny.json");
}

TEST(DolaLane, MatchesReferenceOnBundledModel) {
  check_against_reference(bundled(), "bundled.json");
}

TEST(DolaLane, EarlyExitLogitsSkipTheFinalNorm) {
  // The last block's row through ln_f is the model's own output; without
  // ln_f it is not (the premature rows are read the HF way, without it).
  LoadedModel m = bundled();
  auto s = make_session(m, "Once upon a time", {parse_strategy("dola=low")}, 1);
  s->prefill();
  const LaneStep& ls = s->history()[0]->lanes[0];
  const int c = m.engine->config().n_embd, n = m.engine->config().n_layer;
  const float* last = ls.residuals.data() + static_cast<size_t>(n) * c;
  const std::vector<float> with = lens_logits(m.engine->weights(), last);
  const std::vector<float> without = early_exit_logits(m.engine->weights(), last);
  double diff_with = 0, diff_without = 0;
  for (size_t i = 0; i < with.size(); ++i) {
    diff_with = std::max(diff_with, std::abs(double(with[i]) - ls.logits[i]));
    diff_without = std::max(diff_without, std::abs(double(without[i]) - ls.logits[i]));
  }
  EXPECT_LT(diff_with, 1e-3);
  EXPECT_GT(diff_without, 1.0);
}

TEST(DolaLane, SamplingAndPenaltyRunOnTheContrast) {
  LoadedModel m = bundled();
  const SamplingParams p = parse_strategy("dola=1,3,top_k=3,temperature=0.8,seed=5");
  auto s = make_session(m, "Once upon a time", {p}, 12);
  s->run(100);
  for (const StepTracePtr& t : s->history()) {
    const LaneStep& ls = t->lanes[0];
    ASSERT_TRUE(ls.dola);
    const SamplingRecord rec =
        sample_next(ls.dola->contrast, ls.context_ids, p, ls.step_index, nullptr);
    EXPECT_EQ(rec.draw.chosen_token, ls.chosen_token);
    EXPECT_TRUE(std::isfinite(ls.dola->contrast[ls.chosen_token]));  // never a filtered token
  }
}

TEST(DolaLane, SameTokensWithoutCacheOrRecordedResiduals) {
  LoadedModel m = bundled();
  const SamplingParams p = parse_strategy("dola=0,1,2,3");
  auto on = make_session(m, "Once upon a time", {p}, 16);
  on->run(100);
  SessionOptions o;
  o.kv_cache = false;
  o.record_residuals = false;  // DoLa lanes record them anyway
  auto off = make_session(m, "Once upon a time", {p}, 16, o);
  off->run(100);
  EXPECT_EQ(on->lanes()[0].generated, off->lanes()[0].generated);
}

TEST(DolaLane, LayersTheModelLacksAreRefusedAndNothingChanges) {
  LoadedModel m = bundled();  // 4 layers: premature layers 0..3
  auto s = make_session(m, "Once upon a time", {SamplingParams{}}, 4);
  try {
    s->set_strategies({SamplingParams{}, parse_strategy("dola=2,4")});
    FAIL() << "layer 4 of a 4-layer model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 4"), std::string::npos) << e.what();
  }
  s->run(100);
  EXPECT_EQ(s->lanes().size(), 1u);
  EXPECT_FALSE(s->history()[0]->lanes[0].dola);
  // rechoose into a DoLa strategy the model lacks leaves the step as it was.
  const int before = s->history().back()->lanes[0].chosen_token;
  EXPECT_THROW(s->rechoose(0, parse_strategy("dola=9")), Error);
  EXPECT_EQ(s->history().back()->lanes[0].chosen_token, before);
  EXPECT_FALSE(s->history().back()->lanes[0].dola);
}

}  // namespace
}  // namespace ts
