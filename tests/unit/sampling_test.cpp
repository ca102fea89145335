// Sampling: parameters and strategy strings, each pipeline stage's edge cases
// (HF transformers' semantics), the pipeline's order and records, the
// counter-based RNG, and seeded sampling frequencies against the expected
// distribution with a chi-square bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sampling/distribution.h"
#include "sampling/draw.h"
#include "sampling/logits_processors.h"
#include "sampling/sampling_params.h"
#include "sampling/sampling_pipeline.h"
#include "util/error.h"

namespace ts {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Logits whose softmax is exactly `probs` (up to rounding).
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(p > 0 ? static_cast<float>(std::log(p)) : kNegInf);
  return out;
}

std::vector<int> kept_ids(const std::vector<float>& logits) {
  std::vector<int> out;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i])) out.push_back(static_cast<int>(i));
  }
  return out;
}

// Expects fn() to throw ts::Error whose message contains `needle`.
void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected ts::Error containing \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message \"" << e.what() << "\" does not name \"" << needle << "\"";
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "message is one line";
  }
}

SamplingParams sampling(float temperature = 1.0f, int top_k = 0, float top_p = 1.0f,
                        float min_p = 0.0f, uint64_t seed = 0) {
  SamplingParams p;
  p.do_sample = true;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

// ---------------------------------------------------------------- parameters

TEST(SamplingParams, DefaultsAreValidGreedy) {
  SamplingParams p;
  EXPECT_FALSE(p.do_sample);
  EXPECT_NO_THROW(p.validate());
}

TEST(SamplingParams, TemperatureMustBePositiveWhenSampling) {
  for (float t : {0.0f, -1.0f, kNaN, std::numeric_limits<float>::infinity()}) {
    SamplingParams p = sampling(t);
    expect_error([&] { p.validate(); }, "temperature");
  }
  SamplingParams greedy;
  greedy.temperature = 0.0f;  // "temperature 0" means argmax: fine when not sampling
  EXPECT_NO_THROW(greedy.validate());
  EXPECT_NO_THROW(sampling(1e-3f).validate());
}

TEST(SamplingParams, TopPMustBeInHalfOpenUnitInterval) {
  for (float v : {0.0f, -0.1f, 1.0001f, 1.5f, kNaN}) {
    SamplingParams p = sampling(1.0f, 0, v);
    expect_error([&] { p.validate(); }, "top_p");
    SamplingParams g;  // refused for greedy too: a bad value is a mistake either way
    g.top_p = v;
    expect_error([&] { g.validate(); }, "top_p");
  }
  EXPECT_NO_THROW(sampling(1.0f, 0, 1.0f).validate());
  EXPECT_NO_THROW(sampling(1.0f, 0, 1e-6f).validate());
}

TEST(SamplingParams, TopKMustBeNonNegative) {
  expect_error([] { sampling(1.0f, -1).validate(); }, "top_k");
  EXPECT_NO_THROW(sampling(1.0f, 0).validate());
  EXPECT_NO_THROW(sampling(1.0f, 1000000).validate());
}

TEST(SamplingParams, MinPMustBeInUnitInterval) {
  for (float v : {-0.01f, 1.01f, kNaN}) {
    expect_error([&] { sampling(1.0f, 0, 1.0f, v).validate(); }, "min_p");
  }
  EXPECT_NO_THROW(sampling(1.0f, 0, 1.0f, 0.0f).validate());
  EXPECT_NO_THROW(sampling(1.0f, 0, 1.0f, 1.0f).validate());
}

TEST(SamplingParams, RepetitionPenaltyMustBePositiveAndFinite) {
  for (float v : {0.0f, -1.3f, kNaN, std::numeric_limits<float>::infinity()}) {
    SamplingParams p;
    p.repetition_penalty = v;
    expect_error([&] { p.validate(); }, "repetition_penalty");
  }
  SamplingParams p;
  p.repetition_penalty = 0.5f;  // < 1 encourages repetition: allowed, as in HF
  EXPECT_NO_THROW(p.validate());
}

// ------------------------------------------------------------ strategy strings

TEST(ParseStrategy, Greedy) {
  EXPECT_EQ(parse_strategy("greedy"), SamplingParams{});
  EXPECT_EQ(parse_strategy("  greedy "), SamplingParams{});
}

TEST(ParseStrategy, SamplingKeysTurnSamplingOn) {
  SamplingParams p = parse_strategy("top_p=0.9,temperature=0.8");
  EXPECT_TRUE(p.do_sample);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_FLOAT_EQ(p.temperature, 0.8f);
  EXPECT_EQ(p.top_k, 0);

  p = parse_strategy("top_k=40");
  EXPECT_TRUE(p.do_sample);
  EXPECT_EQ(p.top_k, 40);

  p = parse_strategy("min_p=0.05");
  EXPECT_TRUE(p.do_sample);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);

  p = parse_strategy("temperature=0.7");
  EXPECT_TRUE(p.do_sample);
  EXPECT_FLOAT_EQ(p.temperature, 0.7f);

  p = parse_strategy(" top_p = 0.95 , top_k=50,seed=11 ");
  EXPECT_TRUE(p.do_sample);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_EQ(p.top_k, 50);
  EXPECT_EQ(p.seed, 11u);

  p = parse_strategy("sample");
  EXPECT_TRUE(p.do_sample);
  EXPECT_FLOAT_EQ(p.temperature, 1.0f);
}

TEST(ParseStrategy, SeedAndPenaltyAloneStayGreedy) {
  SamplingParams p = parse_strategy("repetition_penalty=1.3");
  EXPECT_FALSE(p.do_sample);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.3f);

  p = parse_strategy("seed=7");
  EXPECT_FALSE(p.do_sample);
  EXPECT_EQ(p.seed, 7u);

  p = parse_strategy("greedy,repetition_penalty=1.2,seed=18446744073709551615");
  EXPECT_FALSE(p.do_sample);
  EXPECT_EQ(p.seed, 18446744073709551615ull);
}

TEST(ParseStrategy, ErrorsNameTheKey) {
  expect_error([] { parse_strategy("beam_width=4"); }, "beam_width");
  expect_error([] { parse_strategy("top_p=abc"); }, "top_p");
  expect_error([] { parse_strategy("top_p="); }, "top_p");
  expect_error([] { parse_strategy("top_p=0.9x"); }, "top_p");
  expect_error([] { parse_strategy("top_k=4.5"); }, "top_k");
  expect_error([] { parse_strategy("top_k=99999999999999"); }, "top_k");
  expect_error([] { parse_strategy("seed=-1"); }, "seed");
  expect_error([] { parse_strategy("temperature=warm"); }, "temperature");
  expect_error([] { parse_strategy("min_p"); }, "min_p");
  expect_error([] { parse_strategy("nucleus"); }, "nucleus");
  expect_error([] { parse_strategy("top_p=0.9,top_p=0.8"); }, "top_p");
  expect_error([] { parse_strategy("greedy,top_k=5"); }, "top_k");
  expect_error([] { parse_strategy("top_p=0.9,,top_k=4"); }, "empty");
  expect_error([] { parse_strategy(""); }, "empty");
  // Parsed values are validated.
  expect_error([] { parse_strategy("top_p=1.5"); }, "top_p");
  expect_error([] { parse_strategy("temperature=0"); }, "temperature");
  expect_error([] { parse_strategy("top_k=-3"); }, "top_k");
  expect_error([] { parse_strategy("min_p=2"); }, "min_p");
  expect_error([] { parse_strategy("repetition_penalty=0"); }, "repetition_penalty");
  expect_error([] { parse_strategy("temperature=nan"); }, "temperature");
}

TEST(ParseStrategy, FormatRoundTrips) {
  for (const char* s :
       {"greedy", "top_p=0.9,temperature=0.8", "top_k=40", "min_p=0.05", "temperature=0.7",
        "repetition_penalty=1.3", "seed=7", "sample", "sample,seed=3",
        "top_k=40,top_p=0.95,min_p=0.1,temperature=1.3,"
        "repetition_penalty=0.8,seed=99"}) {
    SamplingParams p = parse_strategy(s);
    EXPECT_EQ(parse_strategy(format_strategy(p)), p) << s << " -> " << format_strategy(p);
  }
  EXPECT_EQ(format_strategy(parse_strategy("temperature=0.8,top_p=0.9")),
            "temperature=0.8,top_p=0.9");
  EXPECT_EQ(format_strategy(SamplingParams{}), "greedy");
}

TEST(ParseStrategy, BeamSearch) {
  SamplingParams p = parse_strategy("beams=4");
  EXPECT_EQ(p.num_beams, 4);
  EXPECT_TRUE(p.beam_search());
  EXPECT_FALSE(p.do_sample);
  EXPECT_FLOAT_EQ(p.length_penalty, 1.0f);
  EXPECT_EQ(p.early_stopping, EarlyStopping::kFalse);
  p = parse_strategy("beams=8,length_penalty=0.6,early_stopping=never");
  EXPECT_EQ(p.num_beams, 8);
  EXPECT_FLOAT_EQ(p.length_penalty, 0.6f);
  EXPECT_EQ(p.early_stopping, EarlyStopping::kNever);
  EXPECT_EQ(parse_strategy("early_stopping=true,beams=2").early_stopping, EarlyStopping::kTrue);
  for (const char* s : {"beams=4", "beams=2,length_penalty=-0.5", "beams=3,early_stopping=true",
                        "beams=8,length_penalty=2,early_stopping=never"}) {
    SamplingParams q = parse_strategy(s);
    EXPECT_EQ(format_strategy(q), s);
    EXPECT_EQ(parse_strategy(format_strategy(q)), q) << s;
  }
  EXPECT_EQ(describe(parse_strategy("beams=4")), "beams 4");
  EXPECT_EQ(describe(parse_strategy("beams=4,length_penalty=0.8,early_stopping=true")),
            "beams 4 \u00b7 lp 0.8 \u00b7 early true");

  expect_error([] { parse_strategy("beams=1"); }, "beams");
  expect_error([] { parse_strategy("beams=9"); }, "beams");
  expect_error([] { parse_strategy("beams=two"); }, "beams");
  expect_error([] { parse_strategy("beams"); }, "beams");
  expect_error([] { parse_strategy("beams=4,top_p=0.9"); }, "top_p");
  expect_error([] { parse_strategy("beams=4,greedy"); }, "greedy");
  expect_error([] { parse_strategy("beams=4,repetition_penalty=1.2"); }, "repetition_penalty");
  expect_error([] { parse_strategy("length_penalty=0.5"); }, "beams");
  expect_error([] { parse_strategy("early_stopping=true"); }, "beams");
  expect_error([] { parse_strategy("beams=4,early_stopping=maybe"); }, "early_stopping");
  expect_error([] { parse_strategy("beams=4,length_penalty=inf"); }, "length_penalty");
  SamplingParams bad;
  bad.num_beams = 9;
  expect_error([&] { bad.validate(); }, "beams");
  bad.num_beams = 4;
  bad.do_sample = true;
  expect_error([&] { bad.validate(); }, "beams");
}

TEST(Describe, ShortLabels) {
  EXPECT_EQ(describe(parse_strategy("greedy")), "greedy");
  EXPECT_EQ(describe(parse_strategy("top_p=0.9,temperature=0.8")), "top-p 0.9 \u00b7 T 0.8");
  EXPECT_EQ(describe(parse_strategy("top_k=40")), "top-k 40");
  EXPECT_EQ(describe(parse_strategy("min_p=0.05")), "min-p 0.05");
  EXPECT_EQ(describe(parse_strategy("temperature=0.7")), "sample \u00b7 T 0.7");
  EXPECT_EQ(describe(parse_strategy("sample")), "sample \u00b7 T 1");
  EXPECT_EQ(describe(parse_strategy("repetition_penalty=1.3")), "greedy \u00b7 rep 1.3");
  EXPECT_EQ(describe(parse_strategy("top_p=0.9,seed=7")), "top-p 0.9 \u00b7 seed 7");
  EXPECT_EQ(describe(parse_strategy("seed=7")), "greedy");  // the seed does not matter
}

// ------------------------------------------------------------------- numerics

TEST(Softmax, MatchesDefinitionAndIsStable) {
  std::vector<float> p = softmax({1.0f, 2.0f, 3.0f});
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(p[0], std::exp(1.0) / z, 1e-7);
  EXPECT_NEAR(p[2], std::exp(3.0) / z, 1e-7);

  p = softmax({1000.0f, 999.0f, -1000.0f});  // no overflow thanks to the max subtraction
  EXPECT_NEAR(p[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-7);
  EXPECT_NEAR(p[1], std::exp(-1.0) / (1.0 + std::exp(-1.0)), 1e-7);
  EXPECT_EQ(p[2], 0.0f);

  p = softmax({kNegInf, 0.0f, kNegInf, 0.0f});
  EXPECT_EQ(p, (std::vector<float>{0.0f, 0.5f, 0.0f, 0.5f}));

  EXPECT_EQ(softmax({kNegInf, kNegInf}), (std::vector<float>{0.0f, 0.0f}));
  EXPECT_TRUE(softmax({}).empty());
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(softmax({inf, 1.0f, inf}), (std::vector<float>{0.5f, 0.0f, 0.5f}));
  expect_error([] { softmax({0.0f, kNaN}); }, "logits contain NaN");
}

TEST(Softmax, LogSoftmaxKeepsTinyProbabilitiesFinite) {
  std::vector<float> l = {0.5f, -2.0f, 3.0f, kNegInf};
  std::vector<float> ls = log_softmax(l);
  std::vector<float> p = softmax(l);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(ls[i], std::log(p[i]), 1e-6);
  EXPECT_EQ(ls[3], kNegInf);
  ls = log_softmax({0.0f, -1000.0f});  // exp(-1000) underflows, its log does not
  EXPECT_NEAR(ls[1], -1000.0f, 1e-3);
  EXPECT_TRUE(std::isfinite(ls[1]));
  expect_error([] { log_softmax({kNaN}); }, "NaN");
}

TEST(TopN, SortedDescendingTiesByLowerId) {
  std::vector<float> v = {0.1f, 0.5f, 0.3f, 0.5f, kNegInf, 0.3f};
  EXPECT_EQ(top_n(v, 4), (std::vector<int>{1, 3, 2, 5}));
  EXPECT_EQ(top_n(v, 100), (std::vector<int>{1, 3, 2, 5, 0, 4}));
  EXPECT_TRUE(top_n(v, 0).empty());
  EXPECT_TRUE(top_n(v, -2).empty());
  EXPECT_EQ(top_n({kNaN, 1.0f, kNaN, 2.0f}, 4), (std::vector<int>{3, 1, 0, 2}));
}

TEST(Entropy, Nats) {
  EXPECT_NEAR(entropy_nats({0.25f, 0.25f, 0.25f, 0.25f}), std::log(4.0), 1e-7);
  EXPECT_EQ(entropy_nats({0.0f, 1.0f, 0.0f}), 0.0);
  EXPECT_NEAR(entropy_nats({0.5f, 0.5f, 0.0f}), std::log(2.0), 1e-7);
}

// ---------------------------------------------------------- repetition penalty

TEST(RepetitionPenalty, DividesPositiveMultipliesNegative) {
  std::vector<float> l = {2.0f, -2.0f, 0.0f, 3.0f, -1.0f};
  apply_repetition_penalty(l, {0, 1, 2}, 2.0f);
  EXPECT_EQ(l, (std::vector<float>{1.0f, -4.0f, 0.0f, 3.0f, -1.0f}));
  // Both directions make a repeated token less likely; < 1 makes it more likely.
  std::vector<float> m = {2.0f, -2.0f};
  apply_repetition_penalty(m, {0, 1}, 0.5f);
  EXPECT_EQ(m, (std::vector<float>{4.0f, -1.0f}));
}

TEST(RepetitionPenalty, OncePerDistinctTokenPromptIncluded) {
  // Context = prompt + generated; token 1 occurs three times, 3 once.
  std::vector<int> prompt = {1, 3, 1};
  std::vector<int> generated = {1};
  std::vector<int> context = prompt;
  context.insert(context.end(), generated.begin(), generated.end());
  std::vector<float> l = {4.0f, 4.0f, 4.0f, -4.0f};
  apply_repetition_penalty(l, context, 2.0f);
  EXPECT_EQ(l, (std::vector<float>{4.0f, 2.0f, 4.0f, -8.0f}));
}

TEST(RepetitionPenalty, NoOpAtOneAndErrors) {
  std::vector<float> l = {1.0f, -1.0f};
  apply_repetition_penalty(l, {0, 1}, 1.0f);
  EXPECT_EQ(l, (std::vector<float>{1.0f, -1.0f}));
  std::vector<float> r = {kNegInf, 1.0f};
  apply_repetition_penalty(r, {0}, 3.0f);
  EXPECT_EQ(r[0], kNegInf);
  expect_error([&] { apply_repetition_penalty(l, {2}, 1.3f); }, "context token id 2");
  expect_error([&] { apply_repetition_penalty(l, {-1}, 1.3f); }, "context token id -1");
  expect_error([&] { apply_repetition_penalty(l, {0}, 0.0f); }, "repetition_penalty");
  // Overflow is clamped: a finite logit stays finite.
  std::vector<float> big = {-3e38f, 3e38f};
  apply_repetition_penalty(big, {0, 1}, 1e-30f);
  EXPECT_FLOAT_EQ(big[0], -3e8f);
  EXPECT_EQ(big[1], std::numeric_limits<float>::max());
}

// ---------------------------------------------------------------- temperature

TEST(Temperature, ScalesLogits) {
  std::vector<float> l = {1.0f, -2.0f, 0.0f, kNegInf};
  apply_temperature(l, 0.5f);
  EXPECT_EQ(l, (std::vector<float>{2.0f, -4.0f, 0.0f, kNegInf}));
  apply_temperature(l, 2.0f);
  EXPECT_EQ(l, (std::vector<float>{1.0f, -2.0f, 0.0f, kNegInf}));
  // Higher temperature flattens, lower sharpens.
  std::vector<float> hot = {2.0f, 0.0f}, cold = {2.0f, 0.0f};
  apply_temperature(hot, 4.0f);
  apply_temperature(cold, 0.25f);
  EXPECT_LT(softmax(hot)[0], softmax({2.0f, 0.0f})[0]);
  EXPECT_GT(softmax(cold)[0], softmax({2.0f, 0.0f})[0]);
}

TEST(Temperature, TinyTemperatureStaysFiniteAndErrors) {
  std::vector<float> l = {10.0f, -10.0f, 9.0f};
  apply_temperature(l, 1e-38f);
  EXPECT_EQ(l[0], std::numeric_limits<float>::max());
  EXPECT_EQ(l[1], -std::numeric_limits<float>::max());
  for (float t : {0.0f, -1.0f, kNaN}) {
    expect_error([&] { apply_temperature(l, t); }, "temperature");
  }
}

// Extreme temperature and repetition penalty: dividing by 1e-38 or 1e-45
// pushes several logits past FLT_MAX. The order must survive (the model's top
// token keeps all the probability, as in exact arithmetic), not become a tie
// that sampling draws from uniformly.
TEST(Temperature, ExtremelySmallTemperatureActsAsArgmax) {
  std::vector<float> l = {9.0f, -10.0f, 10.0f, 9.5f};
  apply_temperature(l, 1e-38f);
  EXPECT_EQ(l[2], std::numeric_limits<float>::max());
  EXPECT_GT(l[2], l[3]);
  EXPECT_GT(l[3], l[0]);
  for (float x : l) EXPECT_TRUE(std::isfinite(x));
  const std::vector<float> probs = softmax(l);
  EXPECT_EQ(probs[2], 1.0f);

  SamplingParams p;
  p.do_sample = true;
  p.temperature = 1e-38f;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    p.seed = seed;
    const SamplingRecord r = sample_next({9.0f, -10.0f, 10.0f, 9.5f}, {}, p, 0);
    ASSERT_EQ(r.draw.chosen_token, 2) << "seed " << seed;
    EXPECT_EQ(r.final_probs[2], 1.0f);
  }
}

TEST(RepetitionPenalty, ExtremelySmallPenaltyKeepsTheOrder) {
  // Tokens 0 and 1 are in the context; 1e-45 multiplies them by 1e45.
  std::vector<float> l = {2.0f, 1.0f, 3.0f, -1.0f};
  apply_repetition_penalty(l, {0, 1}, 1e-45f);
  EXPECT_EQ(l[0], std::numeric_limits<float>::max());
  EXPECT_GT(l[0], l[1]);
  for (float x : l) EXPECT_TRUE(std::isfinite(x));
  // Every logit pushed below -FLT_MAX (they used to tie there): the least
  // negative one stays the unique top and takes all the probability.
  std::vector<float> neg = {-20.0f, -10.0f, -30.0f};
  apply_repetition_penalty(neg, {0, 1, 2}, 3e38f);
  EXPECT_GT(neg[1], neg[0]);
  EXPECT_GT(neg[1], neg[2]);
  EXPECT_EQ(softmax(neg)[1], 1.0f);

  SamplingParams p;
  p.do_sample = true;
  p.repetition_penalty = 1e-45f;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    p.seed = seed;
    const SamplingRecord r = sample_next({2.0f, 1.0f, 3.0f, -1.0f}, {0, 1}, p, 0);
    ASSERT_EQ(r.draw.chosen_token, 0) << "seed " << seed;
  }
  SamplingParams greedy;
  greedy.repetition_penalty = 1e-45f;
  EXPECT_EQ(sample_next({1.0f, 2.0f, 3.0f}, {0, 1}, greedy, 0).draw.chosen_token, 1);
}

// ----------------------------------------------------------------------- top-k

TEST(TopK, KeepsTiesAtTheBoundary) {
  std::vector<float> l = {5.0f, 3.0f, 1.0f, 3.0f, 0.0f};
  apply_top_k(l, 2);  // the 2nd largest is 3, and both 3s are kept
  EXPECT_EQ(kept_ids(l), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(l[0], 5.0f);  // kept logits are unchanged
  EXPECT_EQ(l[2], kNegInf);

  std::vector<float> flat = {1.0f, 1.0f, 1.0f, 1.0f};
  apply_top_k(flat, 1);
  EXPECT_EQ(kept_ids(flat).size(), 4u);
}

TEST(TopK, OffAndLargeKAreNoOps) {
  const std::vector<float> l = {0.3f, -1.0f, 2.0f};
  for (int k : {0, 3, 4, 1000}) {
    std::vector<float> c = l;
    apply_top_k(c, k);
    EXPECT_EQ(c, l) << "k=" << k;
  }
  std::vector<float> c = l;
  apply_top_k(c, 1);
  EXPECT_EQ(kept_ids(c), (std::vector<int>{2}));
  // Fewer finite tokens than k: nothing more is removed.
  std::vector<float> sparse = {kNegInf, 1.0f, kNegInf, 2.0f};
  apply_top_k(sparse, 3);
  EXPECT_EQ(kept_ids(sparse), (std::vector<int>{1, 3}));
  expect_error([&] { apply_top_k(c, -1); }, "top_k");
}

// ----------------------------------------------------------------------- top-p

TEST(TopP, KeepsTheTokenThatCrossesP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 at shuffled ids.
  const std::vector<float> l = logits_of({0.15, 0.5, 0.05, 0.3});
  std::vector<float> c = l;
  apply_top_p(c, 0.7f);  // 0.5 < 0.7, 0.5 + 0.3 crosses it: keep both
  EXPECT_EQ(kept_ids(c), (std::vector<int>{1, 3}));
  c = l;
  apply_top_p(c, 0.85f);  // 0.8 < 0.85, the 0.15 crosses it
  EXPECT_EQ(kept_ids(c), (std::vector<int>{0, 1, 3}));
  c = l;
  apply_top_p(c, 0.3f);  // the top token alone already reaches p
  EXPECT_EQ(kept_ids(c), (std::vector<int>{1}));
  c = l;
  apply_top_p(c, 1e-7f);  // always at least one
  EXPECT_EQ(kept_ids(c), (std::vector<int>{1}));
  c = l;
  apply_top_p(c, 0.999f);
  EXPECT_EQ(kept_ids(c).size(), 4u);
  EXPECT_EQ(c[0], l[0]);  // kept logits are unchanged
}

TEST(TopP, OneKeepsEverythingAndTiesBreakByLowerId) {
  const std::vector<float> l = logits_of({0.3, 0.3, 0.4, 1e-12});
  std::vector<float> c = l;
  apply_top_p(c, 1.0f);
  EXPECT_EQ(c, l);
  // Ranked 2 (0.4), then the tied 0 and 1 by id: 0.4 + 0.3 crosses 0.5 at id 0.
  c = l;
  apply_top_p(c, 0.5f);
  EXPECT_EQ(kept_ids(c), (std::vector<int>{0, 2}));
  // Already removed tokens stay removed and do not count.
  std::vector<float> r = {kNegInf, 0.0f, kNegInf, 0.0f};
  apply_top_p(r, 0.9f);
  EXPECT_EQ(kept_ids(r), (std::vector<int>{1, 3}));
  for (float p : {0.0f, 1.5f, kNaN}) expect_error([&] { apply_top_p(c, p); }, "top_p");
}

// ----------------------------------------------------------------------- min-p

TEST(MinP, RelativeToTheTopProbability) {
  // An absolute floor of 0.3 would remove every token here; min-p scales it by
  // the top probability 0.2, so only tokens below 0.06 go.
  const std::vector<float> l = logits_of({0.2, 0.2, 0.2, 0.2, 0.15, 0.05});
  std::vector<float> c = l;
  apply_min_p(c, 0.3f);
  EXPECT_EQ(kept_ids(c), (std::vector<int>{0, 1, 2, 3, 4}));

  const std::vector<float> peaked = logits_of({0.05, 0.5, 0.3, 0.15});
  c = peaked;
  apply_min_p(c, 0.2f);  // floor 0.1
  EXPECT_EQ(kept_ids(c), (std::vector<int>{1, 2, 3}));
  c = peaked;
  apply_min_p(c, 0.5f);  // floor 0.25
  EXPECT_EQ(kept_ids(c), (std::vector<int>{1, 2}));
  c = peaked;
  apply_min_p(c, 1.0f);  // only the top (and its ties)
  EXPECT_EQ(kept_ids(c), (std::vector<int>{1}));
  c = peaked;
  apply_min_p(c, 0.0f);
  EXPECT_EQ(c, peaked);
  std::vector<float> tie = {2.0f, 2.0f, 1.0f};
  apply_min_p(tie, 1.0f);
  EXPECT_EQ(kept_ids(tie), (std::vector<int>{0, 1}));
  for (float p : {-0.1f, 1.1f, kNaN}) expect_error([&] { apply_min_p(c, p); }, "min_p");
}

// -------------------------------------------------------------------- pipeline

TEST(Pipeline, RecordsEveryStageInOrder) {
  const std::vector<float> l = logits_of({0.05, 0.4, 0.25, 0.2, 0.1});
  SamplingParams p = sampling(0.9f, 4, 0.8f, 0.3f, 5);
  p.repetition_penalty = 1.2f;
  // A banned-words list whose one sequence does not follow this context: the
  // stage is on and removes nothing.
  BannedTokens banned;
  banned.source = "test";
  banned.sequences = banned.multi = {{0, 2}};
  SamplingRecord r = sample_next(l, {1, 4}, p, 0, &banned);
  ASSERT_EQ(r.stages.size(), static_cast<size_t>(kNumStages));
  for (int i = 0; i < kNumStages; ++i) {
    EXPECT_EQ(r.stages[i].name, kStageNames[i]);
    EXPECT_TRUE(r.stages[i].active) << r.stages[i].name;
    EXPECT_EQ(r.stages[i].logits.size(), l.size());
    EXPECT_EQ(r.stages[i].removed_here, static_cast<int>(r.stages[i].removed_ids_here.size()));
    EXPECT_TRUE(
        std::is_sorted(r.stages[i].removed_ids_here.begin(), r.stages[i].removed_ids_here.end()));
    if (i > 0) {
      EXPECT_EQ(r.stages[i].kept, r.stages[i - 1].kept - r.stages[i].removed_here);
      for (int id : r.stages[i].removed_ids_here) {
        EXPECT_TRUE(std::isfinite(r.stages[i - 1].logits[id]));
        EXPECT_EQ(r.stages[i].logits[id], kNegInf);
      }
    }
  }
  EXPECT_EQ(r.stages[0].logits, l);
  EXPECT_EQ(r.stages[0].kept, 5);
  EXPECT_EQ(r.stages[2].removed_here, 0);                          // nothing banned here
  EXPECT_EQ(r.stages[4].removed_ids_here, (std::vector<int>{0}));  // top-k 4 drops the 0.05
  EXPECT_EQ(r.stages.back().logits, r.stages[6].logits);
  EXPECT_EQ(r.step_index, 0);
  EXPECT_EQ(r.params, p);

  // Final probabilities: a distribution over the kept tokens only.
  double sum = 0;
  for (size_t i = 0; i < r.final_probs.size(); ++i) {
    sum += r.final_probs[i];
    if (!std::isfinite(r.stages.back().logits[i])) {
      EXPECT_EQ(r.final_probs[i], 0.0f);
    }
  }
  EXPECT_NEAR(sum, 1.0, 1e-6);

  // The draw: the chosen token is kept, and it is the first whose CDF passes u.
  const DrawRecord& d = r.draw;
  EXPECT_FALSE(d.greedy);
  EXPECT_EQ(d.uniform, uniform_for_step(5, 0));
  std::vector<int> cdf_sorted = d.cdf_tokens;
  std::sort(cdf_sorted.begin(), cdf_sorted.end());
  EXPECT_EQ(cdf_sorted, kept_ids(r.stages.back().logits));
  for (size_t i = 1; i < d.cdf_tokens.size(); ++i) {
    EXPECT_GE(r.final_probs[d.cdf_tokens[i - 1]], r.final_probs[d.cdf_tokens[i]]);
  }
  ASSERT_EQ(d.cdf.size(), d.cdf_tokens.size());
  EXPECT_EQ(d.cdf.back(), 1.0f);
  EXPECT_TRUE(std::is_sorted(d.cdf.begin(), d.cdf.end()));
  size_t first = 0;
  while (first < d.cdf.size() && !(d.cdf[first] > d.uniform)) ++first;
  ASSERT_LT(first, d.cdf.size());
  EXPECT_EQ(d.chosen_token, d.cdf_tokens[first]);
  EXPECT_EQ(d.chosen_prob, r.final_probs[d.chosen_token]);
}

TEST(Pipeline, GreedyIsArgmaxAfterPenaltyOnly) {
  SamplingParams g;  // greedy, but with sampling values set that must be ignored
  g.temperature = 0.1f;
  g.top_k = 1;
  g.top_p = 0.1f;
  g.min_p = 0.9f;
  const std::vector<float> l = {1.0f, 5.0f, 5.0f, 2.0f};
  SamplingRecord r = sample_next(l, {}, g, 0);
  EXPECT_TRUE(r.draw.greedy);
  EXPECT_EQ(r.draw.chosen_token, 1);  // tie between 1 and 2: the lower id
  EXPECT_TRUE(r.draw.cdf.empty());
  EXPECT_FLOAT_EQ(r.draw.chosen_prob, softmax(l)[1]);
  for (int i = 1; i < 7; ++i) {
    EXPECT_FALSE(r.stages[i].active) << r.stages[i].name;
    EXPECT_EQ(r.stages[i].logits, l);
    EXPECT_EQ(r.stages[i].removed_here, 0);
  }
  EXPECT_EQ(r.final_probs, softmax(l));

  // The repetition penalty does apply to greedy and can change its choice.
  SamplingParams rp;
  rp.repetition_penalty = 1.3f;
  EXPECT_EQ(sample_next({2.0f, 1.8f}, {}, rp, 0).draw.chosen_token, 0);
  SamplingRecord pen = sample_next({2.0f, 1.8f}, {0, 0}, rp, 0);
  EXPECT_EQ(pen.draw.chosen_token, 1);  // 2 / 1.3 < 1.8
  EXPECT_TRUE(pen.stages[1].active);
  EXPECT_FLOAT_EQ(pen.stages[1].logits[0], 2.0f / 1.3f);
}

TEST(Pipeline, TemperatureBeforeTopPChangesTheKeptSet) {
  const std::vector<float> l = logits_of({0.7, 0.25, 0.05});
  // Pipeline: T = 0.5 sharpens to ~(0.884, 0.113, 0.005), so top-p 0.8 keeps one token.
  SamplingRecord r = sample_next(l, {}, sampling(0.5f, 0, 0.8f), 0);
  EXPECT_EQ(r.stages[5].kept, 1);
  // The other order would keep two: 0.7 < 0.8 on the untempered distribution.
  std::vector<float> other = l;
  apply_top_p(other, 0.8f);
  apply_temperature(other, 0.5f);
  EXPECT_EQ(kept_ids(other).size(), 2u);
}

TEST(Pipeline, TopKBeforeTopPRenormalises) {
  const std::vector<float> l = logits_of({0.4, 0.3, 0.2, 0.1});
  // top-k 2 leaves (0.571, 0.429); top-p 0.5 is reached by the first alone.
  SamplingRecord r = sample_next(l, {}, sampling(1.0f, 2, 0.5f), 0);
  EXPECT_EQ(r.stages[4].kept, 2);
  EXPECT_EQ(r.stages[5].kept, 1);
  EXPECT_EQ(r.draw.chosen_token, 0);
  EXPECT_EQ(r.draw.chosen_prob, 1.0f);
  std::vector<float> other = l;  // top-p first: 0.4 < 0.5 keeps two, top-k 2 keeps both
  apply_top_p(other, 0.5f);
  apply_top_k(other, 2);
  EXPECT_EQ(kept_ids(other).size(), 2u);
}

TEST(Pipeline, MinPSeesTheTemperedDistribution) {
  const std::vector<float> l = logits_of({0.5, 0.3, 0.2});
  EXPECT_EQ(sample_next(l, {}, sampling(1.0f, 0, 1.0f, 0.5f), 0).stages[6].kept, 2);
  EXPECT_EQ(sample_next(l, {}, sampling(0.5f, 0, 1.0f, 0.5f), 0).stages[6].kept, 1);
}

TEST(Pipeline, InactiveStagesAreMarked) {
  SamplingRecord r = sample_next({1.0f, 2.0f, 3.0f}, {}, sampling(), 0);
  EXPECT_TRUE(r.stages[0].active);
  for (int i = 1; i < 7; ++i) EXPECT_FALSE(r.stages[i].active) << r.stages[i].name;
  EXPECT_TRUE(r.stages[7].active);
  EXPECT_EQ(r.draw.cdf_tokens, (std::vector<int>{2, 1, 0}));
  // top_k >= vocab is active but removes nothing.
  r = sample_next({1.0f, 2.0f, 3.0f}, {}, sampling(1.0f, 3), 0);
  EXPECT_TRUE(r.stages[4].active);
  EXPECT_EQ(r.stages[4].removed_here, 0);
}

TEST(Pipeline, RawNegativeInfinityIsNotChosen) {
  std::vector<float> l = {kNegInf, 0.0f, kNegInf, 0.0f};
  SamplingRecord r = sample_next(l, {}, sampling(), 3);
  EXPECT_EQ(r.stages[0].kept, 2);
  EXPECT_EQ(r.draw.cdf_tokens, (std::vector<int>{1, 3}));
  EXPECT_TRUE(r.draw.chosen_token == 1 || r.draw.chosen_token == 3);
}

TEST(Pipeline, RefusesBadInput) {
  expect_error([] { sample_next({0.0f, kNaN}, {}, sampling(), 0); }, "logits contain NaN");
  expect_error([] { sample_next({0.0f, kNaN}, {}, SamplingParams{}, 0); }, "logits contain NaN");
  expect_error(
      [] {
        sample_next({0.0f, std::numeric_limits<float>::infinity()}, {}, sampling(), 0);
      },
      "+inf");
  expect_error([] { sample_next({kNegInf, kNegInf}, {}, sampling(), 0); }, "-inf");
  expect_error([] { sample_next({}, {}, sampling(), 0); }, "empty");
  expect_error([] { sample_next({0.0f, 1.0f}, {5}, SamplingParams{}, 0); }, "context token id 5");
  expect_error([] { sample_next({0.0f, 1.0f}, {}, sampling(), -1); }, "step index");
  expect_error([] { sample_next({0.0f, 1.0f}, {}, sampling(0.0f), 0); }, "temperature");
  expect_error([] { sample_next({0.0f, 1.0f}, {}, sampling(1.0f, 0, 2.0f), 0); }, "top_p");
}

TEST(Pipeline, GptSizedVocabulary) {
  std::mt19937 gen(1234);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> l(50257);
  for (float& x : l) x = nd(gen);
  std::vector<int> context = {464, 3290, 318, 464, 50256};
  SamplingParams p = parse_strategy("top_k=200,top_p=0.9,min_p=0.02,temperature=0.8");
  p.repetition_penalty = 1.3f;
  SamplingRecord r = sample_next(l, context, p, 17);
  EXPECT_EQ(r.stages[0].kept, 50257);
  EXPECT_GE(r.stages[4].kept, 200);
  EXPECT_LE(r.stages[6].kept, r.stages[5].kept);
  EXPECT_GE(r.stages[7].kept, 1);
  EXPECT_EQ(r.draw.cdf_tokens.size(), static_cast<size_t>(r.stages[7].kept));
  EXPECT_TRUE(std::isfinite(r.stages[7].logits[r.draw.chosen_token]));
  // Plain sampling keeps the whole vocabulary in the CDF.
  SamplingRecord all = sample_next(l, context, sampling(), 17);
  EXPECT_EQ(all.draw.cdf_tokens.size(), l.size());
  EXPECT_EQ(all.draw.cdf_tokens[0], top_n(l, 1)[0]);
}

// ---------------------------------------------------------------- RNG & draw

TEST(Rng, CounterBasedAndPinned) {
  // Values from an independent implementation of the same definition: a change
  // here changes every seeded session ever saved.
  EXPECT_EQ(splitmix64(0x9E3779B97F4A7C15ull), 0xE220A8397B1DCDAFull);  // SplitMix64(0) #1
  EXPECT_DOUBLE_EQ(uniform_for_step(0, 0), 0.8833108082136426);
  EXPECT_DOUBLE_EQ(uniform_for_step(0, 1), 0.43152799704850997);
  EXPECT_DOUBLE_EQ(uniform_for_step(7, 0), 0.5243459416779314);
  EXPECT_DOUBLE_EQ(uniform_for_step(7, 3), 0.8832292678334052);
  EXPECT_DOUBLE_EQ(uniform_for_step(42, 1000), 0.8440051422667861);
  EXPECT_DOUBLE_EQ(uniform_for_step(~0ull, 123456), 0.5333859512725483);
  expect_error([] { uniform_for_step(1, -1); }, "step index");
}

TEST(Rng, UniformNumbersAreUniform) {
  // 16 bins, 160k steps of one seed: chi-square with 15 degrees of freedom.
  constexpr int kBins = 16, kN = 160000;
  for (uint64_t seed : {0ull, 1ull, 2ull, 12345ull}) {
    std::vector<int> counts(kBins, 0);
    for (int s = 0; s < kN; ++s) {
      double u = uniform_for_step(seed, s);
      ASSERT_GE(u, 0.0);
      ASSERT_LT(u, 1.0);
      ++counts[static_cast<int>(u * kBins)];
    }
    double chi2 = 0;
    const double e = static_cast<double>(kN) / kBins;
    for (int c : counts) chi2 += (c - e) * (c - e) / e;
    EXPECT_LT(chi2, 44.26) << "seed " << seed;  // 99.99% quantile of chi-square(15)
  }
  // Neighbouring seeds are not shifted copies of one stream.
  int same = 0;
  for (int s = 0; s < 1000; ++s) same += uniform_for_step(1, s + 1) == uniform_for_step(2, s);
  EXPECT_EQ(same, 0);
}

TEST(Determinism, SameSeedAndStepSameToken) {
  const std::vector<float> l = logits_of({0.2, 0.2, 0.2, 0.2, 0.2});
  SamplingParams p = parse_strategy("temperature=1.1,seed=99");
  for (int step = 0; step < 50; ++step) {
    SamplingRecord a = sample_next(l, {}, p, step);
    SamplingRecord b = sample_next(l, {}, p, step);
    EXPECT_EQ(a.draw.chosen_token, b.draw.chosen_token);
    EXPECT_EQ(a.draw.uniform, b.draw.uniform);
    EXPECT_EQ(a.draw.cdf, b.draw.cdf);
    EXPECT_EQ(a.final_probs, b.final_probs);
  }
  // Re-running out of order (step back, branch) gives the same tokens.
  std::vector<int> forward, backward(50);
  for (int s = 0; s < 50; ++s) forward.push_back(sample_next(l, {}, p, s).draw.chosen_token);
  for (int s = 49; s >= 0; --s) backward[s] = sample_next(l, {}, p, s).draw.chosen_token;
  EXPECT_EQ(forward, backward);
  // Different steps and different seeds give different numbers and, over a
  // run, different tokens.
  EXPECT_NE(sample_next(l, {}, p, 0).draw.uniform, sample_next(l, {}, p, 1).draw.uniform);
  SamplingParams q = p;
  q.seed = 100;
  std::vector<int> other;
  for (int s = 0; s < 50; ++s) other.push_back(sample_next(l, {}, q, s).draw.chosen_token);
  EXPECT_NE(forward, other);
  std::set<int> distinct(forward.begin(), forward.end());
  EXPECT_GT(distinct.size(), 1u);
}

TEST(Draw, WalksTheCdf) {
  const std::vector<float> l = {0.0f, 0.0f, 0.0f, kNegInf};
  const std::vector<float> probs = {0.5f, 0.25f, 0.25f, 0.0f};
  EXPECT_EQ(draw_sample(l, probs, 0.0).chosen_token, 0);
  EXPECT_EQ(draw_sample(l, probs, 0.4999).chosen_token, 0);
  EXPECT_EQ(draw_sample(l, probs, 0.5).chosen_token, 1);  // first with cumulative > u
  EXPECT_EQ(draw_sample(l, probs, 0.75).chosen_token, 2);
  EXPECT_EQ(draw_sample(l, probs, 0.9999999).chosen_token, 2);
  DrawRecord d = draw_sample(l, probs, 0.6);
  EXPECT_EQ(d.cdf_tokens, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(d.cdf, (std::vector<float>{0.5f, 0.75f, 1.0f}));
  EXPECT_EQ(d.chosen_prob, 0.25f);
}

TEST(Draw, RoundingGuardAndUnderflowedTokens) {
  // Probabilities that sum to a little less than 1: the walk uses their sum,
  // and a u just below 1 still lands on a token with probability > 0.
  const std::vector<float> l = {0.0f, 0.0f, 0.0f};
  const std::vector<float> probs = {0.6f, 0.39999f, 0.0f};  // last: finite logit, p = 0
  const double u_max = std::nextafter(1.0, 0.0);
  DrawRecord d = draw_sample(l, probs, u_max);
  EXPECT_EQ(d.chosen_token, 1);
  EXPECT_EQ(d.cdf.back(), 1.0f);
  for (double u = 0.0; u < 1.0; u += 0.001) EXPECT_NE(draw_sample(l, probs, u).chosen_token, 2);
  // Unnormalised weights: u is a position in their actual total (0.5 * 0.5 < 0.3).
  EXPECT_EQ(draw_sample({0.0f, 0.0f}, {0.3f, 0.2f}, 0.5).chosen_token, 0);
  EXPECT_EQ(draw_sample({0.0f, 0.0f}, {0.3f, 0.2f}, 0.61).chosen_token, 1);
  expect_error([&] { draw_sample(l, probs, 1.0); }, "uniform");
  expect_error([&] { draw_sample(l, {0.0f, 0.0f, 0.0f}, 0.5); }, "probability");
  expect_error([&] { draw_sample(l, {1.0f}, 0.5); }, "same size");
  expect_error([&] { draw_greedy({kNegInf}, {0.0f}); }, "finite");
}

// ------------------------------------------------- frequencies vs chi-square

// Counts of the chosen token over steps 0..n-1 for one seed.
std::vector<int> draw_counts(const std::vector<float>& logits, const SamplingParams& p, int n) {
  std::vector<int> counts(logits.size(), 0);
  for (int s = 0; s < n; ++s) ++counts[sample_next(logits, {}, p, s).draw.chosen_token];
  return counts;
}

// Pearson's statistic of counts against expected probabilities (entries with
// expected probability 0 must have count 0, else the statistic is infinite).
double chi_square(const std::vector<int>& counts, const std::vector<double>& expected) {
  double n = std::accumulate(counts.begin(), counts.end(), 0.0);
  double chi2 = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = n * expected[i];
    if (e == 0) {
      if (counts[i] != 0) return std::numeric_limits<double>::infinity();
      continue;
    }
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

// 99.99% quantiles of chi-square: with fixed seeds the test is deterministic,
// and a correct sampler would fail one seed with probability 1e-4.
constexpr double kChi2Q9999Df4 = 23.51;
constexpr double kChi2Q9999Df2 = 18.42;
constexpr int kDraws = 20000;

TEST(Frequencies, MatchTheDistribution) {
  const std::vector<double> probs = {0.4, 0.25, 0.2, 0.1, 0.05};
  const std::vector<float> l = logits_of(probs);
  for (uint64_t seed : {0ull, 7ull, 2024ull}) {
    std::vector<int> counts = draw_counts(l, sampling(1.0f, 0, 1.0f, 0.0f, seed), kDraws);
    const double chi2 = chi_square(counts, probs);
    EXPECT_LT(chi2, kChi2Q9999Df4) << "seed " << seed;
    // The same statistic rejects a wrong distribution: two entries swapped...
    EXPECT_GT(chi_square(counts, {0.25, 0.4, 0.2, 0.1, 0.05}), kChi2Q9999Df4);
    // ...or a subtler error of 0.02 moved between two tokens.
    EXPECT_GT(chi_square(counts, {0.4, 0.25, 0.2, 0.08, 0.07}), kChi2Q9999Df4);
  }
}

TEST(Frequencies, TemperedDistribution) {
  const std::vector<double> base = {0.4, 0.25, 0.2, 0.1, 0.05};
  const float t = 0.7f;
  std::vector<double> tempered;
  double z = 0;
  for (double p : base) z += std::pow(p, 1.0 / t);
  for (double p : base) tempered.push_back(std::pow(p, 1.0 / t) / z);
  std::vector<int> counts = draw_counts(logits_of(base), sampling(t, 0, 1.0f, 0.0f, 3), kDraws);
  EXPECT_LT(chi_square(counts, tempered), kChi2Q9999Df4);
  // A sampler that ignored the temperature would be caught.
  EXPECT_GT(chi_square(counts, base), kChi2Q9999Df4);
}

TEST(Frequencies, TruncatedDistributionIsRenormalised) {
  const std::vector<double> base = {0.4, 0.25, 0.2, 0.1, 0.05};
  // top-p 0.8 keeps 0.4, 0.25, 0.2 (crossing token) -> 0.4/0.85, 0.25/0.85, 0.2/0.85.
  const std::vector<double> expected = {0.4 / 0.85, 0.25 / 0.85, 0.2 / 0.85, 0.0, 0.0};
  std::vector<int> counts = draw_counts(logits_of(base), sampling(1.0f, 0, 0.8f, 0.0f, 11), kDraws);
  EXPECT_EQ(counts[3] + counts[4], 0);
  EXPECT_LT(chi_square(counts, expected), kChi2Q9999Df2);
  // Sampling the kept tokens with their unrenormalised weights (the rest of the
  // mass on the last kept token) would be rejected.
  EXPECT_GT(chi_square(counts, {0.4, 0.25, 0.35, 0.0, 0.0}), kChi2Q9999Df2);
}

}  // namespace
}  // namespace ts
