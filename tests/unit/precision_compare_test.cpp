// The comparison (session/precision_compare, tokenscope-cli
// --compare-precision and --compare-model) checked against figures computed
// here independently: two engines (the bundled model in two formats, or the
// bundled model and its draft), each run greedily on its own KV sequence, and
// the KL of their softmax distributions summed in the plain way.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "session/model_setup.h"
#include "session/precision_compare.h"
#include "test_paths.h"
#include "util/error.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

const char* const kPrompt = "Today's weather is so";
constexpr int kSteps = 12;  // decode steps after the prefill

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path draft_dir() { return fs::path(TS_SOURCE_DIR) / "assets/models/tokenscope-tiny-draft"; }

LoadedModel load_dir(const fs::path& dir, WeightFormat w) {
  return load_model_setup(ModelSetupOptions{.model = dir,
                                            .tokenizer = {},
                                            .device = "cpu",
                                            .weights = w,
                                            .kv = WeightFormat::kF32,
                                            .cpu_threads = 2,
                                            .cache_sequences = 4});
}

LoadedModel load_bundled(WeightFormat w) { return load_dir(test::bundled_model_dir(), w); }

// softmax of a row, in double.
std::vector<double> softmax(const std::vector<float>& logits) {
  double mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, static_cast<double>(v));
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(logits[i] - mx);
  for (double& v : p) v /= sum;
  return p;
}

double plain_kl(const std::vector<float>& a, const std::vector<float>& b) {
  const std::vector<double> p = softmax(a), q = softmax(b);
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] > 0) kl += p[i] * std::log(p[i] / q[i]);
  return kl;
}

int plain_argmax(const std::vector<float>& v) {
  int best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = static_cast<int>(i);
  return best;
}

// Per step: the reference's logits and the compared engine's on the same
// (the reference's) context, plus each engine's own greedy tokens.
struct Independent {
  std::vector<double> kl;
  std::vector<int> ref_tokens, forced_tokens, free_tokens;
};

// Feeds `engine` the prompt, then at each step the token `next` picks from
// the row it returned; returns every row's logits.
template <typename Next>
std::vector<std::vector<float>> run_rows(Engine& engine, const std::vector<int>& prompt, int rows,
                                         Next next) {
  const SeqId seq = engine.cache().create();
  std::vector<std::vector<float>> out;
  std::vector<int> in = prompt;
  for (int i = 0; i < rows; ++i) {
    out.push_back(engine.forward({ForwardRequest{seq, in}}, ForwardOptions{}).outputs[0].logits);
    in = {next(i, out.back())};
  }
  engine.cache().release(seq);
  return out;
}

Independent independent(const LoadedModel& a, const LoadedModel& b, int rows) {
  std::vector<int> prompt;
  for (const TokenSpan& t : a.tokenizer->encode_prompt(kPrompt)) prompt.push_back(t.id);
  Independent r;
  const auto ref_rows = run_rows(*a.engine, prompt, rows, [&](int, const std::vector<float>& l) {
    r.ref_tokens.push_back(plain_argmax(l));
    return r.ref_tokens.back();
  });
  // Teacher-forced: fed the reference's token whatever its own argmax.
  const auto forced_rows = run_rows(*b.engine, prompt, rows, [&](int i, const auto& l) {
    r.forced_tokens.push_back(plain_argmax(l));
    return r.ref_tokens[i];
  });
  run_rows(*b.engine, prompt, rows, [&](int, const auto& l) {
    r.free_tokens.push_back(plain_argmax(l));
    return r.free_tokens.back();
  });
  for (int i = 0; i < rows; ++i) r.kl.push_back(plain_kl(ref_rows[i], forced_rows[i]));
  return r;
}

Independent independent(WeightFormat ref, WeightFormat cmp, int rows) {
  return independent(load_bundled(ref), load_bundled(cmp), rows);
}

// Two models, both f32: by default the bundled model and its draft.
Independent independent_models(int rows, const fs::path& ref = test::bundled_model_dir(),
                               const fs::path& cmp = draft_dir()) {
  return independent(load_dir(ref, WeightFormat::kF32), load_dir(cmp, WeightFormat::kF32), rows);
}

// A row of the class against row i of the independent runs.
void expect_row(const PrecisionStep& s, const Independent& want, int i) {
  EXPECT_NEAR(s.kl, want.kl[i], 1e-9 + 1e-6 * want.kl[i]) << i;
  EXPECT_EQ(s.reference_token, want.ref_tokens[i]) << i;
  EXPECT_EQ(s.compared_token, want.forced_tokens[i]) << i;
  EXPECT_EQ(s.free_token, want.free_tokens[i]) << i;
}

TEST(PrecisionCompare, KlOfConstructedRowsMatchesTheFormula) {
  // p = softmax(0, log 3) = (1/4, 3/4), q = (1/2, 1/2).
  const float p[] = {0.0f, std::log(3.0f)}, q[] = {5.0f, 5.0f};
  const double want = 0.25 * std::log(0.25 / 0.5) + 0.75 * std::log(0.75 / 0.5);
  EXPECT_NEAR(kl_divergence(p, q, 2), want, 1e-7);
  EXPECT_EQ(kl_divergence(p, p, 2), 0.0);
  EXPECT_GT(kl_divergence(q, p, 2), 0.0);
}

TEST(PrecisionCompare, RanksAndTopKBreakTiesByLowerId) {
  const float l[] = {1.0f, 3.0f, 3.0f, 2.0f, -1.0f};
  EXPECT_EQ(top_k_tokens(l, 5, 3), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(token_rank(l, 5, 1), 1);
  EXPECT_EQ(token_rank(l, 5, 2), 2);
  EXPECT_EQ(token_rank(l, 5, 4), 5);
  EXPECT_EQ(argmax_token(l, 5), 1);
}

TEST(PrecisionCompare, FirstDifferenceOfConstructedSequences) {
  EXPECT_EQ(first_difference({1, 2, 3}, {1, 2, 3}), -1);
  EXPECT_EQ(first_difference({1, 2, 3, 4}, {1, 2, 9, 4}), 2);
  EXPECT_EQ(first_difference({7}, {8}), 0);
  EXPECT_EQ(first_difference({1, 2}, {1, 2, 3}), -1);
}

TEST(PrecisionCompare, PairsAreParsedAndBadOnesRefusedInOneLine) {
  const PrecisionPair p = parse_precision_pair("--compare-precision", "bf16,q4", "auto");
  EXPECT_EQ(p.reference, WeightFormat::kBF16);
  EXPECT_EQ(p.compared, WeightFormat::kQ4);
  EXPECT_EQ(precision_pair_name(p), "bf16,q4");
  for (const char* bad : {"f32", "f32,", "f32,q5", "q8,q8", "f32,q8,q4", ""})
    EXPECT_THROW(parse_precision_pair("--compare-precision", bad, "cpu"), Error) << bad;
  EXPECT_THROW(parse_precision_pair("--compare-precision", "f32,q8", "cuda"), Error);
}

// The same format on both sides: every logit is the same, so the KL is
// exactly 0, top-1 always agrees, no rank changes and no divergence.
TEST(PrecisionCompare, SameFormatTwiceHasZeroKlAndFullAgreement) {
  LoadedModel a = load_bundled(WeightFormat::kF32), b = load_bundled(WeightFormat::kF32);
  PrecisionCompare cmp(a.tokenizer, a.engine, b.engine, {WeightFormat::kF32, WeightFormat::kF32});
  cmp.set_prompt(kPrompt);
  for (int i = 0; i <= kSteps; ++i) {
    const PrecisionStep& s = cmp.step();
    EXPECT_EQ(s.kl, 0.0) << i;
    EXPECT_TRUE(s.top1_agrees()) << i;
    EXPECT_TRUE(s.changed.empty()) << i;
    EXPECT_EQ(s.free_token, s.reference_token) << i;
  }
  const PrecisionSummary sum = cmp.summary();
  EXPECT_EQ(sum.steps, kSteps + 1);
  EXPECT_EQ(sum.mean_kl, 0.0);
  EXPECT_EQ(sum.top1_agreement, 1.0);
  EXPECT_EQ(sum.first_divergence, -1);
  EXPECT_EQ(sum.reference_bytes, sum.compared_bytes);
}

// q4 against f32 on the bundled model: the class's KL, top-1 and tokens
// are those of two independent greedy runs, and the first divergence is
// the first step where their own greedy texts differ.
TEST(PrecisionCompare, MatchesIndependentRunsAndFindsTheFirstDivergence) {
  const Independent want = independent(WeightFormat::kF32, WeightFormat::kQ4, kSteps + 1);
  std::unique_ptr<PrecisionCompare> cmp = [] {
    ModelSetupOptions o;
    o.model = test::bundled_model_dir();
    o.cpu_threads = 2;
    return PrecisionCompare::load(o, {WeightFormat::kF32, WeightFormat::kQ4});
  }();
  cmp->set_prompt(kPrompt);
  for (int i = 0; i <= kSteps; ++i) {
    const PrecisionStep& s = cmp->step();
    expect_row(s, want, i);
    EXPECT_GT(s.kl, 0.0) << i;  // q4 changes every logit
    // q4 moves fewer bytes than f32: about an eighth of the weights.
    EXPECT_LT(s.compared_bytes, 0.25 * s.reference_bytes) << i;
  }
  const PrecisionSummary sum = cmp->summary();
  const int diverge = first_difference(want.ref_tokens, want.free_tokens);
  ASSERT_GE(diverge, 0) << "q4 follows f32 for all " << kSteps << " steps: pick a longer run";
  EXPECT_EQ(sum.first_divergence, diverge);
  // Before the divergence the contexts are the same: top-1 agrees there and
  // disagrees at it.
  for (int i = 0; i < diverge; ++i) EXPECT_TRUE(cmp->steps()[i].top1_agrees()) << i;
  EXPECT_FALSE(cmp->steps()[diverge].top1_agrees());
}

// The bundled model against its draft (another model, the same vocabulary):
// KL, top-1, the free tokens and the first divergence are those of the two
// models run independently, and each side's weight and KV bytes are its own.
void expect_models_match_independent_runs(const fs::path& ref, const fs::path& compared) {
  const Independent want = independent_models(kSteps + 1, ref, compared);
  ModelSetupOptions o;
  o.model = ref;
  o.device = "cpu";
  o.cpu_threads = 2;
  std::unique_ptr<PrecisionCompare> cmp = PrecisionCompare::load_models(o, compared);
  EXPECT_FALSE(cmp->pair().has_value());
  EXPECT_EQ(cmp->labels().reference, ref.filename().string());
  EXPECT_EQ(cmp->labels().compared, compared.filename().string());
  cmp->set_prompt(kPrompt);
  for (int i = 0; i <= kSteps; ++i) {
    const PrecisionStep& s = cmp->step();
    expect_row(s, want, i);
  }
  const PrecisionSummary sum = cmp->summary();
  int agree = 0;
  double kl = 0;
  for (int i = 0; i <= kSteps; ++i) {
    agree += want.ref_tokens[i] == want.forced_tokens[i];
    kl += want.kl[i];
  }
  EXPECT_NEAR(sum.mean_kl, kl / (kSteps + 1), 1e-6 * kl / (kSteps + 1));
  EXPECT_DOUBLE_EQ(sum.top1_agreement, static_cast<double>(agree) / (kSteps + 1));
  EXPECT_EQ(sum.first_divergence, first_difference(want.ref_tokens, want.free_tokens));
  // KV bytes per token: K and V of every layer's key/value heads, f32.
  for (auto [config, kv] :
       {std::pair{cmp->reference_engine().config(), sum.reference_kv_token_bytes},
        std::pair{cmp->compared_engine().config(), sum.compared_kv_token_bytes}}) {
    EXPECT_DOUBLE_EQ(kv, 2.0 * config.n_layer * config.kv_heads() * config.head_dim() * 4);
  }
  // The compared model is the smaller one: fewer weight bytes per step.
  EXPECT_LT(sum.compared_weight_bytes, sum.reference_weight_bytes);
  EXPECT_GT(sum.compared_weight_bytes, 0.0);
}

TEST(ModelCompare, MatchesIndependentRunsOfTwoModels) {
  expect_models_match_independent_runs(test::bundled_model_dir(), draft_dir());
}

// A GPT-2 model against a Llama-shaped one with the same vocabulary (the
// GPT-2 fixture's and a grouped-query Llama fixture's): they compare the
// same way, and the Llama model's KV cache holds fewer bytes per token.
TEST(ModelCompare, ComparesAGpt2ModelWithALlamaModel) {
  const fs::path llama = test::fixture_dir() / "llama" / "llama-gqa2";
  expect_models_match_independent_runs(test::tiny_model_dir(), llama);
  ModelSetupOptions o;
  o.model = test::tiny_model_dir();
  o.device = "cpu";
  o.cpu_threads = 2;
  std::unique_ptr<PrecisionCompare> cmp = PrecisionCompare::load_models(o, llama);
  cmp->set_prompt(kPrompt);
  cmp->step();
  const PrecisionSummary sum = cmp->summary();
  EXPECT_LT(sum.compared_kv_token_bytes, sum.reference_kv_token_bytes);
  EXPECT_LT(cmp->compared_engine().config().kv_heads(), cmp->compared_engine().config().n_head);
}

// A model with another vocabulary (size, or the same size with other ids)
// is refused in one line naming the first id that differs, as a draft is.
TEST(ModelCompare, RefusesAnotherVocabulary) {
  ModelSetupOptions o;
  o.model = test::bundled_model_dir();
  o.device = "cpu";
  o.cpu_threads = 2;
  // A GPT-2 and a Llama model whose 457-token vocabulary is not the bundled one's.
  for (const fs::path& other :
       {test::tiny_model_dir(), test::fixture_dir() / "llama" / "llama-gqa2"}) {
    try {
      PrecisionCompare::load_models(o, other);
      ADD_FAILURE() << other << ": another vocabulary was compared with the bundled one";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("compared model: its vocabulary has 457 tokens"),
                std::string::npos)
          << e.what();
    }
  }
  // The draft with two ids swapped in its vocab.json: same size, other ids.
  const fs::path dir = fs::temp_directory_path() / ("ts_swapped_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* f : {"config.json", "merges.txt", "model.safetensors"})
    fs::copy_file(draft_dir() / f, dir / f, fs::copy_options::overwrite_existing);
  std::string vocab = read_text(draft_dir() / "vocab.json");
  // "!" is id 0 and "\"" id 1 in a GPT-2 byte-level vocabulary.
  const std::string a = "\"!\": 0", b = "\"\\\"\": 1";
  const size_t pa = vocab.find(a), pb = vocab.find(b);
  ASSERT_NE(pa, std::string::npos) << vocab.substr(0, 80);
  ASSERT_NE(pb, std::string::npos) << vocab.substr(0, 80);
  vocab.replace(pb, b.size(), "\"\\\"\": 0");
  vocab.replace(pa, a.size(), "\"!\": 1");
  std::ofstream(dir / "vocab.json", std::ios::binary) << vocab;
  try {
    PrecisionCompare::load_models(o, dir);
    ADD_FAILURE() << "a vocabulary with other ids was compared";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compared model: its token 0 is"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("the first id that differs"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// --- tokenscope-cli --compare-precision ---------------------------------

struct CliRun {
  int exit_code = -1;
  std::string out, err;
};

CliRun run_cli(const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("ts_precision_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cmd = std::string("'") + TS_CLI_PATH + "' " + args + " >'" +
                          (dir / "out").string() + "' 2>'" + (dir / "err").string() + "'";
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(dir / "out");
  r.err = read_text(dir / "err");
  fs::remove_all(dir);
  return r;
}

// Each case's flags (after `model`) exit with code 2 and one line that says
// the case's words.
void expect_refusals(const std::string& model,
                     const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [args, says] : cases) {
    const CliRun r = run_cli(model + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    std::vector<std::string> lines;
    std::istringstream in(r.err);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("note: ", 0) != 0) lines.push_back(l);
    ASSERT_EQ(lines.size(), 1u) << args << "\n" << r.err;
    EXPECT_EQ(lines[0].rfind("tokenscope-cli: ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find(says), std::string::npos) << args << "\n" << lines[0];
  }
}

// The bundled model, f32 against bf16: each row's KL and top-1 as printed
// equal the independent runs' (the KL is printed with 7 significant digits),
// and so do the summary's mean KL and agreement.
TEST(PrecisionCli, PrintsTheKlAndAgreementOfIndependentRuns) {
  const Independent want = independent(WeightFormat::kF32, WeightFormat::kBF16, kSteps + 1);
  const CliRun r =
      run_cli("--model '" + test::bundled_model_dir().string() + "' --threads 2 --steps " +
              std::to_string(kSteps) + " --compare-precision f32,bf16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex row(R"(^\s*(\d+)\s+".*?"\s+(\S+)\s+(yes|NO)\s)");
  std::istringstream in(r.out);
  int rows = 0, agree = 0;
  double sum = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const int i = std::stoi(m[1]);
    ASSERT_EQ(i, rows) << line;
    ASSERT_LT(i, static_cast<int>(want.kl.size()));
    const double kl = std::stod(m[2]);
    EXPECT_NEAR(kl, want.kl[i], 1e-6 * want.kl[i] + 1e-12) << line;
    EXPECT_EQ(m[3] == "yes", want.ref_tokens[i] == want.forced_tokens[i]) << line;
    agree += want.ref_tokens[i] == want.forced_tokens[i];
    sum += want.kl[i];
    ++rows;
  }
  ASSERT_EQ(rows, kSteps + 1) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(mean KL (\S+) nats)"))) << r.out;
  EXPECT_NEAR(std::stod(m[1]), sum / rows, 1e-6 * sum / rows);
  ASSERT_TRUE(
      std::regex_search(r.out, m, std::regex(R"(top-1 agreement (\S+)% \((\d+) of (\d+)\))")))
      << r.out;
  EXPECT_EQ(std::stoi(m[2]), agree);
  EXPECT_EQ(std::stoi(m[3]), rows);
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f", 100.0 * agree / rows);
  EXPECT_EQ(m[1].str(), pct);
  const int diverge = first_difference(want.ref_tokens, want.free_tokens);
  if (diverge < 0)
    EXPECT_NE(r.out.find("first divergence: none"), std::string::npos);
  else
    EXPECT_NE(r.out.find("first divergence: step " + std::to_string(diverge) + " "),
              std::string::npos);
}

TEST(PrecisionCli, BadListsGiveOneLineAndExitCodeTwo) {
  const std::string model = "--model '" + test::bundled_model_dir().string() + "' ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--compare-precision f32", "expected two formats"},
      {"--compare-precision f32,q9", "unknown format 'q9'"},
      {"--compare-precision bf16,bf16", "the same format twice"},
      {"--compare-precision f32,q8 --device cuda", "q8 weights run on the CPU only"},
      {"--compare-precision f32,q8 --weights q8", "--compare-precision and --weights conflict"},
      {"--compare-precision f32,q8 --compare greedy beams=2", "conflict"},
      {"--compare-precision", "--compare-precision"},
  };
  expect_refusals(model, cases);
}

// --compare-model: the bundled model against its draft prints the two
// independent runs' mean KL, agreement and first divergence, the two model
// names, and each model's weight MB and KV bytes per token.
TEST(ModelCli, PrintsTheFiguresOfTwoIndependentModels) {
  const Independent want = independent_models(kSteps + 1);
  const CliRun r =
      run_cli("--model '" + test::bundled_model_dir().string() + "' --threads 2 --steps " +
              std::to_string(kSteps) + " --compare-model '" + draft_dir().string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("models: tokenscope-tiny (reference) vs tokenscope-tiny-draft", 0), 0u)
      << r.out;
  double sum = 0;
  int agree = 0;
  for (int i = 0; i <= kSteps; ++i) {
    sum += want.kl[i];
    agree += want.ref_tokens[i] == want.forced_tokens[i];
  }
  const double mean = sum / (kSteps + 1);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(mean KL (\S+) nats)"))) << r.out;
  EXPECT_NEAR(std::stod(m[1]), mean, 1e-6 * mean);
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(top-1 agreement \S+% \((\d+) of (\d+)\))")))
      << r.out;
  EXPECT_EQ(std::stoi(m[1]), agree);
  EXPECT_EQ(std::stoi(m[2]), kSteps + 1);
  const int diverge = first_difference(want.ref_tokens, want.free_tokens);
  if (diverge < 0)
    EXPECT_NE(r.out.find("first divergence: none"), std::string::npos) << r.out;
  else
    EXPECT_NE(r.out.find("first divergence: step " + std::to_string(diverge) + " "),
              std::string::npos)
        << r.out;
  // Each model's line: its name, weight MB and KV bytes per token (f32).
  for (const auto& [name, dir] :
       {std::pair{std::string("tokenscope-tiny"), test::bundled_model_dir()},
        std::pair{std::string("tokenscope-tiny-draft"), draft_dir()}}) {
    const ModelConfig c = load_dir(dir, WeightFormat::kF32).engine->config();
    const long kv = 2L * c.n_layer * c.kv_heads() * c.head_dim() * 4;
    EXPECT_TRUE(
        std::regex_search(r.out, std::regex("\n  " + name + R"(: .* weights \d+\.\d\d MB, KV )" +
                                            std::to_string(kv) + " bytes per token\n")))
        << name << "\n"
        << r.out;
  }
}

TEST(ModelCli, RefusalsGiveOneLineAndExitCodeTwo) {
  const std::string model = "--model '" + test::bundled_model_dir().string() + "' ";
  const std::string draft = "'" + draft_dir().string() + "'";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--compare-model '" + test::tiny_model_dir().string() + "'",
       "compared model: its vocabulary has"},
      {"--compare-model /no/such/model", "compared model: "},
      {"--compare-model " + draft + " --compare-precision f32,q8", "conflict"},
      {"--compare-model " + draft + " --strategy top_k=5",
       "--compare-model and --strategy conflict"},
      {"--compare-model", "--compare-model"},
  };
  expect_refusals(model, cases);
}

}  // namespace
}  // namespace ts
