// The bundled Llama-shaped model (assets/models/tokenscope-tiny-llama): it
// shares tokenscope-tiny's tokenizer (its tokenizer.json gives the same ids
// as tokenscope-tiny's vocab.json and merges.txt), fits its budget, matches
// PyTorch, its card holds the engine's validation loss, its KV cache holds a
// quarter of tokenscope-tiny's bytes per token, and every strategy runs on
// it: the lossless ones (speculative with either family as the draft,
// lookahead, prompt lookup, contrastive at alpha 0) give its greedy tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exported_model_checks.h"
#include "session/model_setup.h"
#include "session/session.h"
#include "test_paths.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

fs::path models_dir() { return fs::path(TS_SOURCE_DIR) / "assets/models"; }
fs::path llama_dir() { return models_dir() / "tokenscope-tiny-llama"; }
fs::path gpt2_dir() { return models_dir() / "tokenscope-tiny"; }

ModelSetupOptions cpu_options(const fs::path& model) {
  ModelSetupOptions o;
  o.model = model;
  o.device = "cpu";
  o.cpu_threads = 2;
  return o;
}

// The two twins, and each one loaded as the other's draft.
struct Twins {
  LoadedModel llama, gpt2, llama_as_draft, gpt2_as_draft;
};

Twins& twins() {
  static Twins t = [] {
    Twins q;
    q.llama = load_model_setup(cpu_options(llama_dir()));
    q.gpt2 = load_model_setup(cpu_options(gpt2_dir()));
    q.llama_as_draft = load_draft_model(cpu_options(gpt2_dir()), llama_dir(), 4);
    q.gpt2_as_draft = load_draft_model(cpu_options(llama_dir()), gpt2_dir(), 4);
    return q;
  }();
  return t;
}

TEST(BundledLlama, IsLlamaShapedWithGroupedQueryAttentionWithinItsBudget) {
  const auto cfg = test::read_json_file(llama_dir() / "config.json");
  EXPECT_EQ(cfg["model_type"], "llama");
  EXPECT_LT(cfg["num_key_value_heads"].get<int>(), cfg["num_attention_heads"].get<int>());
  EXPECT_LE(fs::file_size(llama_dir() / "model.safetensors"), 25u * 1000 * 1000);
  const ModelConfig& c = twins().llama.engine->config();
  const ModelConfig& g = twins().gpt2.engine->config();
  EXPECT_EQ(c.vocab_size, g.vocab_size);
  EXPECT_EQ(c.n_ctx, g.n_ctx);
  EXPECT_EQ(c.kv_heads(), cfg["num_key_value_heads"].get<int>());
}

TEST(BundledLlama, ItsTokenizerJsonGivesTokenscopeTinysIds) {
  for (const char* f : {"vocab.json", "merges.txt"})
    EXPECT_EQ(test::read_text_file(llama_dir() / f), test::read_text_file(gpt2_dir() / f)) << f;
  ASSERT_TRUE(fs::exists(llama_dir() / "tokenizer.json"));
  const std::string val = test::read_text_file(test::fixture_dir() / "bundled/val.txt");
  for (const std::string& text :
       {std::string("Today's weather is so"), std::string("  two  spaces,\ttabs\nand lines\r\n"),
        std::string("caf\u00e9 \u00fcber na\u00efve \u2014 \U0001F600 \u4f60\u597d"),
        std::string("x = f(3.14159) + 1_000;  // code?"), val.substr(0, 4000)}) {
    EXPECT_EQ(twins().llama.tokenizer->encode_ids(text), twins().gpt2.tokenizer->encode_ids(text))
        << text.substr(0, 60);
  }
}

TEST(BundledLlama, MatchesPyTorchLogits) {
  test::expect_pytorch_logits(twins().llama, test::fixture_dir() / "bundled-llama/reference.json");
}

TEST(BundledLlama, ValidationLossAgreesWithPyTorchAndTheModelCard) {
  test::expect_validation_loss(twins().llama, test::fixture_dir() / "bundled-llama/reference.json",
                               test::fixture_dir() / "bundled/val.txt", llama_dir());
}

// What the lesson and the KV panel say: 2 (K, V) x kv heads x head dim x 4
// bytes per layer, and GQA makes the Llama twin's a quarter of GPT-2's.
TEST(BundledLlama, KeepsAQuarterOfTheKvBytesPerToken) {
  auto bytes = [](const ModelConfig& c) {
    return int64_t{2} * c.n_layer * c.kv_heads() * c.head_dim() * 4;
  };
  const ModelConfig& c = twins().llama.engine->config();
  const ModelConfig& g = twins().gpt2.engine->config();
  EXPECT_EQ(bytes(g), 8192);
  EXPECT_EQ(bytes(c), 2048);
  EXPECT_EQ(c.n_head / c.kv_heads(), 4);
}

std::vector<int> run(const LoadedModel& m, const std::string& strategy, int new_tokens,
                     const LoadedModel* draft = nullptr,
                     const std::string& prompt = "Once upon a time, there was a") {
  SessionOptions o;
  o.max_new_tokens = new_tokens;
  o.record_attention = false;
  o.record_residuals = false;
  Session s(m.tokenizer, m.engine, o);
  if (draft) s.set_draft_engine(draft->engine);
  s.set_prompt(prompt);
  s.set_strategies({parse_strategy(strategy)});
  int guard = 0;
  while (s.can_step() && ++guard < 4 * new_tokens + 8) s.step();
  EXPECT_FALSE(s.can_step()) << strategy << " did not finish";
  return s.lane_tokens(0);
}

TEST(BundledLlama, LosslessStrategiesGiveItsGreedyTokens) {
  const int n = 24;
  const std::vector<int> greedy = run(twins().llama, "greedy", n);
  ASSERT_GT(greedy.size(), size_t{n});
  // The GPT-2 twin drafting for the Llama twin, and the other way round:
  // greedy verification commits the target's argmax whatever the draft says.
  EXPECT_EQ(run(twins().llama, "spec=4", n, &twins().gpt2_as_draft), greedy);
  EXPECT_EQ(run(twins().gpt2, "spec=3", n, &twins().llama_as_draft),
            run(twins().gpt2, "greedy", n));
  EXPECT_EQ(run(twins().llama, "lookahead", n), greedy);
  EXPECT_EQ(run(twins().llama, "prompt_lookup", n), greedy);
  EXPECT_EQ(run(twins().llama, "contrastive=4,alpha=0", n), greedy);
}

TEST(BundledLlama, SamplingBeamsAndDolaRunToTheEnd) {
  const int n = 12;
  const int vocab = twins().llama.engine->config().vocab_size;
  for (const char* strategy : {"temperature=0.8,top_p=0.9,seed=7", "beams=3", "dola=high",
                               "contrastive=4,alpha=0.6", "spec=4,temperature=1,seed=3"}) {
    const LoadedModel* draft =
        std::string(strategy).rfind("spec", 0) == 0 ? &twins().gpt2_as_draft : nullptr;
    const std::vector<int> a = run(twins().llama, strategy, n, draft);
    EXPECT_GT(a.size(), size_t{n}) << strategy;
    for (int id : a) EXPECT_TRUE(id >= 0 && id < vocab) << strategy;
    // Seeded and deterministic: the same lane again gives the same tokens.
    EXPECT_EQ(run(twins().llama, strategy, n, draft), a) << strategy;
  }
}

}  // namespace
}  // namespace ts
