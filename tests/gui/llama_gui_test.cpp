// The window on Llama-family models (random-weight fixtures): the Attention
// panel groups the query heads that share a KV head, the KV cache panel's
// bytes per token follow the model's shape, and the RoPE view's angles and
// scores are the model's own. Expected numbers come from the fixtures'
// config.json and from the traced attention, never from the app's formulas.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "app/app.h"
#include "app/panels/kv.h"
#include "engine/kv_cache.h"
#include "gui_test_support.h"

namespace ts::app {
namespace {

namespace fs = std::filesystem;

fs::path llama_fixture(const std::string& name) {
  return test::fixture_model().parent_path() / "llama" / name;
}

nlohmann::json config_of(const fs::path& dir) {
  std::ifstream in(dir / "config.json");
  return nlohmann::json::parse(in);
}

// HF's head_dim when the config gives it, else hidden_size / num_attention_heads.
int head_dim_of(const nlohmann::json& c) {
  return c.value("head_dim", c["hidden_size"].get<int>() / c["num_attention_heads"].get<int>());
}

AppOptions llama_options(const std::string& fixture, const std::string& layout) {
  AppOptions o = test::fixture_options(layout, "the cat sat on the mat");
  o.setup.model = llama_fixture(fixture);
  return o;
}

// Loads, then prefill and `decode_steps` steps.
void run_steps(App& app, int decode_steps) {
  app.load_model_blocking();
  app.settle();
  for (int i = 0; i <= decode_steps; ++i) {
    app.advance();
    app.settle(2, 100);
  }
}

TEST(GuiLlama, AttentionGroupsTheQueryHeadsThatShareAKvHead) {
  REQUIRE_DISPLAY();
  const nlohmann::json c = config_of(llama_fixture("llama-gqa4-theta"));
  const int heads = c["num_attention_heads"], kv = c["num_key_value_heads"];
  ASSERT_EQ(heads, 8);
  ASSERT_EQ(kv, 2);
  App app(llama_options("llama-gqa4-theta", "attention"));
  run_steps(app, 2);
  app.state().attention.head = 5;
  app.state().settings.show_thumbnails = true;
  app.settle(3, 50);
  const AttentionPanel& p = app.attention_panel();
  EXPECT_EQ(p.gqa_note_drawn(), "8 query heads share 2 KV heads: 4 per group");
  EXPECT_EQ(p.group_label_drawn(), "KV head 1: q heads 4-7");
  EXPECT_EQ(p.group_separators_drawn(), kv - 1);
  app.state().attention.head = 3;
  app.settle(3, 50);
  EXPECT_EQ(app.attention_panel().group_label_drawn(), "KV head 0: q heads 0-3");
}

// GPT-2 is multi-head attention: nothing about groups is drawn.
TEST(GuiLlama, Gpt2AttentionDrawsNoGroups) {
  REQUIRE_DISPLAY();
  App app(test::fixture_options("attention"));
  run_steps(app, 1);
  app.state().settings.show_thumbnails = true;
  app.settle(3, 50);
  const AttentionPanel& p = app.attention_panel();
  EXPECT_EQ(p.gqa_note_drawn(), "");
  EXPECT_EQ(p.group_label_drawn(), "");
  EXPECT_EQ(p.group_separators_drawn(), 0);
}

// 2 (K and V) x layers x KV heads x head_dim x value bytes, from config.json.
int64_t kv_bytes_per_token(const nlohmann::json& c, int value_bytes) {
  const int head_dim = head_dim_of(c);
  return int64_t(2) * c["num_hidden_layers"].get<int>() * c["num_key_value_heads"].get<int>() *
         head_dim * value_bytes;
}

TEST(GuiLlama, KvPanelShowsBytesPerTokenOfTargetAndDraft) {
  REQUIRE_DISPLAY();
  const nlohmann::json target = config_of(llama_fixture("llama-gqa4-theta"));
  const nlohmann::json draft = config_of(llama_fixture("llama-gqa2"));
  AppOptions o = llama_options("llama-gqa4-theta", "kv");
  o.draft_model = llama_fixture("llama-gqa2");
  o.compare = {"greedy", "spec=3"};
  App app(o);
  run_steps(app, 1);
  const std::vector<KvTokenBytes>& lines = app.kv_cache_panel().token_bytes_drawn();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].per_token, kv_bytes_per_token(target, 4));
  EXPECT_EQ(lines[0].per_layer * target["num_hidden_layers"].get<int>(), lines[0].per_token);
  EXPECT_EQ(lines[1].per_token, kv_bytes_per_token(draft, 4));
  EXPECT_NE(lines[0].text.find("2 KV heads"), std::string::npos) << lines[0].text;
  EXPECT_EQ(lines[1].text.rfind("draft: ", 0), 0u) << lines[1].text;
}

// --kv f16 halves the value size the line multiplies by.
TEST(GuiLlama, KvPanelBytesFollowTheCacheFormat) {
  REQUIRE_DISPLAY();
  const nlohmann::json c = config_of(llama_fixture("qwen2-sharded"));
  AppOptions o = llama_options("qwen2-sharded", "kv");
  o.setup.kv = WeightFormat::kF16;
  App app(o);
  run_steps(app, 0);
  const std::vector<KvTokenBytes>& lines = app.kv_cache_panel().token_bytes_drawn();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].per_token, kv_bytes_per_token(c, 2));
}

// A q8 cache stores 32 values in 34 bytes: the line multiplies by 34/32 B
// and its totals are whole blocks (2 KV heads of 32 values: 2 blocks for K,
// 2 for V, 136 bytes per token per layer). The line is a function of the
// model's shape and the occupancy, so it is checked without a window.
TEST(GuiLlama, KvPanelLineCountsQ8AtThirtyFourBytesPerThirtyTwoValues) {
  ModelConfig cfg;
  cfg.family = ModelFamily::kLlama;
  cfg.n_embd = 128;
  cfg.n_head = 4;
  cfg.n_kv_head = 2;
  cfg.n_layer = 3;
  KvCacheShape shape;
  shape.n_layer = cfg.n_layer;
  shape.n_head = cfg.kv_heads();
  shape.head_dim = cfg.head_dim();
  shape.num_blocks = 8;
  shape.format = WeightFormat::kQ8;
  const KvTokenBytes t = kv_token_bytes("model", cfg, KvCacheManager(shape).occupancy());
  EXPECT_EQ(t.per_layer, 2 * 2 * 34);
  EXPECT_EQ(t.per_token, 2 * 2 * 34 * 3);
  EXPECT_NE(t.text.find("32 dims \u00D7 34/32 B = 136 B per token per layer"), std::string::npos)
      << t.text;
  shape.format = WeightFormat::kF16;
  EXPECT_NE(kv_token_bytes("model", cfg, KvCacheManager(shape).occupancy())
                .text.find("32 dims \u00D7 2 B = 256 B per token per layer"),
            std::string::npos);
}

TEST(GuiLlama, RopeViewAnglesAndScoresAreTheModelsOwn) {
  REQUIRE_DISPLAY();
  const nlohmann::json c = config_of(llama_fixture("llama-gqa2"));
  const int heads = c["num_attention_heads"], kv = c["num_key_value_heads"];
  const int d = head_dim_of(c);
  const double base = c["rope_theta"];
  App app(llama_options("llama-gqa2", "rope"));
  run_steps(app, 2);
  constexpr int kLayer = 1, kHead = 4;
  app.state().attention.layer = kLayer;  // the RoPE view shows the Attention panel's head
  app.state().attention.head = kHead;
  app.settle(3, 50);
  for (int i = 0; i < 50 && app.rope_panel().scores_drawn().empty(); ++i) app.settle(2, 10);
  const RopePanel& p = app.rope_panel();
  const SnapshotPtr snap = app.controller().snapshot();
  const LaneStep& rec = snap->history.back()->lanes[0];
  const int pos = static_cast<int>(rec.context_ids.size()) - 1;
  ASSERT_EQ(p.query_pos(), pos);
  // theta_i = pos * base^(-2i/d), i < d/2.
  ASSERT_EQ(p.angles_drawn().size(), static_cast<size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i)
    EXPECT_NEAR(p.angles_drawn()[i], pos * std::pow(base, -2.0 * i / d), 1e-9) << "pair " << i;
  // One score by hand from the recorded q (last row) and k (two rows back) of
  // the head's KV head.
  const std::vector<float>& qk = p.qk();
  const int ld = heads * d + kv * d, kv_head = kHead / (heads / kv);
  ASSERT_EQ(qk.size(), static_cast<size_t>(pos + 1) * ld);
  ASSERT_EQ(p.scores_drawn().size(), static_cast<size_t>(pos + 1));
  double dot = 0;
  for (int i = 0; i < d; ++i)
    dot += double(qk[size_t(pos) * ld + kHead * d + i]) *
           qk[size_t(pos - 2) * ld + heads * d + kv_head * d + i];
  EXPECT_NEAR(p.scores_drawn()[2], dot / std::sqrt(double(d)), 1e-5);
  // The softmax of the scores is the attention row the engine traced for
  // this layer and head: the q and k are the rotated ones it attended with.
  ASSERT_GT(rec.attention.size(), static_cast<size_t>(kLayer));
  ASSERT_TRUE(rec.attention[kLayer]);
  const std::vector<float>& att = *rec.attention[kLayer];  // [head][1][context]
  ASSERT_EQ(att.size(), static_cast<size_t>(heads) * (pos + 1));
  double mx = -1e30, sum = 0;
  for (float s : p.scores_drawn()) mx = std::max(mx, double(s));
  for (float s : p.scores_drawn()) sum += std::exp(s - mx);
  for (int j = 0; j <= pos; ++j)
    EXPECT_NEAR(att[size_t(kHead) * (pos + 1) + j], std::exp(p.scores_drawn()[pos - j] - mx) / sum,
                1e-5)
        << "key " << j;
}

TEST(GuiLlama, RopeViewSaysWhyGpt2HasNone) {
  REQUIRE_DISPLAY();
  App app(test::fixture_options("rope"));
  run_steps(app, 1);
  const RopePanel& p = app.rope_panel();
  EXPECT_NE(p.reason_drawn().find("GPT-2 has no rotary positions"), std::string::npos)
      << p.reason_drawn();
  EXPECT_TRUE(p.scores_drawn().empty());
  EXPECT_TRUE(p.angles_drawn().empty());
}

}  // namespace
}  // namespace ts::app
