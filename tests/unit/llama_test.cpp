// The Llama family (model_type llama / qwen2) on the CPU backend, against
// the float64 PyTorch reference of tools/reference/make_llama_reference.py
// (tests/fixtures/llama/<model>/reference.safetensors): prefill, cached
// decode one token at a time, a context longer than a KV block, BF16
// storage and conversion, attention records, the KV cache's and cost
// model's grouped-query figures, the logit lens, and config refusals.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/backend_factory.h"
#include "engine/cost_model.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "engine/logit_lens.h"
#include "model/config_json.h"
#include "model/llama_loader.h"
#include "model/model_loader.h"
#include "model/safetensors.h"
#include "session/memory_report.h"
#include "session/model_setup.h"
#include "session/score.h"
#include "session/session.h"
#include "session/session_export.h"
#include "session/session_import.h"
#include "test_model_writer.h"
#include "test_models.h"
#include "test_paths.h"
#include "util/error.h"
#include "util/proc_fields.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

constexpr float kTolerance = 1e-4f;
const char* const kModels[] = {"llama-gqa2", "llama-gqa4-theta", "qwen2-mha", "llama-bf16",
                               "qwen2-sharded"};

fs::path model_dir(const std::string& name) { return test::fixture_dir() / "llama" / name; }

struct Reference {
  std::map<std::string, std::vector<int>> prompts;
  std::map<std::string, std::vector<float>> tensors;  // name -> values
  std::map<std::string, std::vector<int64_t>> shapes;
};

Reference reference(const std::string& name) {
  Reference r;
  std::ifstream in(model_dir(name) / "reference.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  for (const auto& c : j.at("cases"))
    r.prompts[c.at("name").get<std::string>()] = c.at("token_ids").get<std::vector<int>>();
  SafetensorsFile st(model_dir(name) / "reference.safetensors");
  for (const TensorInfo& t : st.tensors()) {
    std::vector<float> v(t.numel());
    SafetensorsFile::to_f32(t, v.data());
    r.tensors[t.name] = std::move(v);
    r.shapes[t.name] = t.shape;
  }
  return r;
}

std::shared_ptr<Engine> engine_for(std::shared_ptr<const ModelWeights> w) {
  return std::make_shared<Engine>(w, make_cpu_backend(w, 2), 128);
}
std::shared_ptr<Engine> engine_for(const std::string& name) {
  return engine_for(std::make_shared<const ModelWeights>(load_model(model_dir(name))));
}

// Largest |a - b| over n values, and where.
void expect_close(const float* a, const float* b, size_t n, const std::string& what) {
  float worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= worst)) worst = d, at = i;
  }
  EXPECT_LE(worst, kTolerance) << what << ": element " << at << " is " << a[at] << ", reference "
                               << b[at];
}

// The one-line message `f` throws as ts::Error ("" when it does not throw).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  return {};
}

class LlamaModels : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaModels, PrefillMatchesTheReference) {
  const Reference ref = reference(GetParam());
  auto engine = engine_for(GetParam());
  const int v = engine->config().vocab_size;
  for (const std::string c : {"short", "long"}) {
    SCOPED_TRACE(c);
    const std::vector<int>& ids = ref.prompts.at(c);
    ForwardOptions o;
    o.all_logits = true;
    o.record_attention = c == "short";
    const SeqId seq = engine->cache().create();
    const ForwardResult r = engine->forward({{seq, ids}}, o);
    const EntryOutput& out = r.outputs[0];
    ASSERT_EQ(out.logit_rows, static_cast<int>(ids.size()));
    ASSERT_EQ(out.logits.size(), ids.size() * v);
    expect_close(out.logits.data(), ref.tensors.at(c + ".logits").data(), out.logits.size(),
                 "logits");
    if (c == "short") {
      // [L][H][T][T] in the reference; [head][row][context] per layer here,
      // one row per query head (not per KV head).
      const std::vector<int64_t>& s = ref.shapes.at("short.attention");
      const ModelConfig& cfg = engine->config();
      ASSERT_EQ(s[0], cfg.n_layer);
      ASSERT_EQ(s[1], cfg.n_head);
      ASSERT_EQ(out.attention.size(), static_cast<size_t>(cfg.n_layer));
      const size_t per_layer = static_cast<size_t>(s[1] * s[2] * s[3]);
      for (int l = 0; l < cfg.n_layer; ++l) {
        ASSERT_EQ(out.attention[l].size(), per_layer);
        expect_close(out.attention[l].data(),
                     ref.tensors.at("short.attention").data() + l * per_layer, per_layer,
                     "attention of layer " + std::to_string(l));
      }
    }
    engine->cache().release(seq);
  }
}

// Cached decode one token at a time over the long prompt (37 tokens, past
// two 16-token KV blocks): each step's logits are the reference's row.
TEST_P(LlamaModels, CachedDecodeStepByStepMatchesTheReference) {
  const Reference ref = reference(GetParam());
  auto engine = engine_for(GetParam());
  const int v = engine->config().vocab_size;
  const std::vector<int>& ids = ref.prompts.at("long");
  ASSERT_GT(ids.size(), 2u * static_cast<size_t>(engine->cache().shape().block_size));
  const std::vector<float>& logits = ref.tensors.at("long.logits");
  const SeqId seq = engine->cache().create();
  // A short prefill first, then single tokens: both paths write the cache.
  ForwardResult r = engine->forward({{seq, {ids.begin(), ids.begin() + 3}}}, {});
  expect_close(r.outputs[0].logits.data(), logits.data() + 2 * v, v, "prefill row 2");
  for (size_t t = 3; t < ids.size(); ++t) {
    r = engine->forward({{seq, {ids[t]}}}, {});
    ASSERT_EQ(r.outputs[0].logits.size(), static_cast<size_t>(v));
    expect_close(r.outputs[0].logits.data(), logits.data() + t * v, v,
                 "decode step at position " + std::to_string(t));
  }
  EXPECT_EQ(engine->cache().length(seq), static_cast<int>(ids.size()));
}

// The logit lens's last row is the model's own logits: the final norm is
// the RMSNorm and the unembedding the (possibly untied) lm_head.
TEST_P(LlamaModels, LogitLensLastRowIsTheModelsLogits) {
  auto engine = engine_for(GetParam());
  const ModelConfig& cfg = engine->config();
  ForwardOptions o;
  o.record_residuals = true;
  o.record_hidden = true;
  const ForwardResult r = engine->forward_scratch({5, 17, 230, 99}, o);
  const EntryOutput& out = r.outputs[0];
  ASSERT_EQ(out.residuals.size(), static_cast<size_t>(cfg.n_layer + 1) * cfg.n_embd);
  const std::vector<float> lens =
      lens_logits(engine->weights(), out.residuals.data() + size_t(cfg.n_layer) * cfg.n_embd);
  expect_close(lens.data(), out.logits.data(), lens.size(), "lens logits");
  EXPECT_EQ(out.hidden.size(), 4u * cfg.n_embd);
  const std::vector<LensRow> rows = logit_lens(engine->weights(), out.residuals, 3);
  EXPECT_EQ(rows.size(), static_cast<size_t>(cfg.n_layer + 1));
}

// parameter_count is what the files hold (a tied lm_head once).
TEST_P(LlamaModels, ParameterCountIsWhatTheFilesHold) {
  const ModelWeights w = load_model(model_dir(GetParam()));
  int64_t in_files = 0;
  for (const auto& entry : fs::directory_iterator(model_dir(GetParam()))) {
    const std::string f = entry.path().filename().string();
    if (f.rfind("model", 0) != 0 || entry.path().extension() != ".safetensors") continue;
    const SafetensorsFile st(entry.path());
    for (const TensorInfo& t : st.tensors()) in_files += static_cast<int64_t>(t.numel());
  }
  EXPECT_EQ(w.config.parameter_count(), in_files);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlamaModels, ::testing::ValuesIn(kModels), [](const auto& info) {
  std::string n = info.param;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
});

TEST(LlamaConfig, FixturesCoverTheFeatures) {
  const ModelConfig gqa2 = load_model(model_dir("llama-gqa2")).config;
  EXPECT_EQ(gqa2.family, ModelFamily::kLlama);
  EXPECT_EQ(gqa2.n_head / gqa2.kv_heads(), 2);
  EXPECT_FALSE(gqa2.tied_embeddings);
  const ModelConfig gqa4 = load_model(model_dir("llama-gqa4-theta")).config;
  EXPECT_EQ(gqa4.n_head / gqa4.kv_heads(), 4);
  EXPECT_EQ(gqa4.rope_theta, 500000.0f);
  EXPECT_NE(gqa4.q_dim(), gqa4.n_embd);  // explicit head_dim
  const ModelWeights qwen = load_model(model_dir("qwen2-mha"));
  EXPECT_EQ(qwen.config.family, ModelFamily::kQwen2);
  EXPECT_EQ(qwen.config.kv_heads(), qwen.config.n_head);
  EXPECT_NE(qwen.layers[0].attn_qkv_bias, nullptr);
  EXPECT_NE(qwen.lm_head, nullptr);
  EXPECT_EQ(load_model(model_dir("llama-bf16")).storage_dtype, "BF16");
  EXPECT_FALSE(fs::exists(model_dir("qwen2-sharded") / "model.safetensors"));
}

// The BF16 fixture's values are bf16 numbers: converting them to bf16
// (--weights bf16) changes nothing, and the bf16 kernels match the reference.
TEST(LlamaWeights, Bf16ConversionMatchesTheReference) {
  const Reference ref = reference("llama-bf16");
  auto w = std::make_shared<const ModelWeights>(
      convert_weights(load_model(model_dir("llama-bf16")), WeightFormat::kBF16));
  ASSERT_EQ(w->format, WeightFormat::kBF16);
  auto engine = engine_for(w);
  ForwardOptions o;
  o.all_logits = true;
  const ForwardResult r = engine->forward_scratch(ref.prompts.at("long"), o);
  expect_close(r.outputs[0].logits.data(), ref.tensors.at("long.logits").data(),
               r.outputs[0].logits.size(), "bf16 logits");
}

// A Llama whose widths are whole blocks (32 wide, MLP 64) in q8 and q4:
// the fused q|k|v and gate|up matrices go through the integer block kernel
// transposed like GPT-2's. Cached decode one token at a time gives the
// scratch forward's rows bit for bit (every row is the same sum, whatever
// the row count), and the q8 logits stay near PyTorch's fp32 ones: measured
// here, largest |diff| 0.60 on logits up to 8.2 (a 32-wide model: one
// block per activation row, so one large value coarsens the whole row's
// rounding); asserted at 1.2. q4's (6.2) is printed, not bounded.
TEST(LlamaWeights, BlockFormatsDecodeAsTheyPrefillAndStayNearTheReference) {
  const Reference ref = reference("llama-bf16");
  const std::vector<int>& ids = ref.prompts.at("long");
  const std::vector<float>& want = ref.tensors.at("long.logits");
  for (const auto& [format, bound] :
       {std::pair{WeightFormat::kQ8, 1.2f}, std::pair{WeightFormat::kQ4, 0.0f}}) {
    SCOPED_TRACE(weight_format_name(format));
    auto engine = engine_for(std::make_shared<const ModelWeights>(
        convert_weights(load_model(model_dir("llama-bf16")), format)));
    const size_t v = static_cast<size_t>(engine->config().vocab_size);
    ForwardOptions all;
    all.all_logits = true;
    const std::vector<float> scratch = engine->forward_scratch(ids, all).outputs[0].logits;
    ASSERT_EQ(scratch.size(), ids.size() * v);
    float worst = 0, largest = 0;
    for (size_t i = 0; i < scratch.size(); ++i) {
      worst = std::max(worst, std::fabs(scratch[i] - want[i]));
      largest = std::max(largest, std::fabs(want[i]));
    }
    std::printf("%s llama-bf16: largest |logit - reference| %.3g (largest |logit| %.3g)\n",
                weight_format_name(format), worst, largest);
    EXPECT_GT(worst, 0.0f);
    if (bound > 0) EXPECT_LE(worst, bound);
    const SeqId seq = engine->cache().create();
    ForwardResult r = engine->forward({{seq, {ids[0]}}}, {});
    for (size_t t = 1; t < ids.size(); ++t) {
      r = engine->forward({{seq, {ids[t]}}}, {});
      ASSERT_EQ(0,
                std::memcmp(r.outputs[0].logits.data(), scratch.data() + t * v, v * sizeof(float)))
          << "decode step at position " << t;
    }
    engine->cache().release(seq);
  }
}

// An untied lm_head converts too (f16 rounds every matrix: near, not equal).
TEST(LlamaWeights, F16ConversionKeepsTheUntiedHead) {
  const Reference ref = reference("llama-gqa2");
  auto w = std::make_shared<const ModelWeights>(
      convert_weights(load_model(model_dir("llama-gqa2")), WeightFormat::kF16));
  ASSERT_NE(w->lm_head_packed, nullptr);
  EXPECT_EQ(w->lm_head, nullptr);
  const ForwardResult r = engine_for(w)->forward_scratch(ref.prompts.at("short"), {});
  const std::vector<float>& logits = ref.tensors.at("short.logits");
  const size_t v = w->config.vocab_size, last = ref.prompts.at("short").size() - 1;
  for (size_t i = 0; i < v; ++i) ASSERT_NEAR(r.outputs[0].logits[i], logits[last * v + i], 0.05);
}

// A conversion error names the checkpoint's own tensor and, for the fused
// q|k|v and gate|up matrices, the element's [out, in] place in it, not the
// engine's GPT-2-style names for the fused matrix.
TEST(LlamaWeights, ConversionErrorsNameTheCheckpointsTensors) {
  ModelWeights w = load_model(model_dir("llama-gqa2"));
  w.source = "model-dir";
  const ModelConfig& c = w.config;
  try {
    convert_weights(w, WeightFormat::kQ8);  // rows of 48 values
    FAIL() << "rows of 48 values were accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "model-dir: tensor model.embed_tokens.weight has rows of 48 values, not a "
                 "multiple of 32, which --weights q8 needs; load it with --weights f16, bf16 or "
                 "f32");
  }
  // Layer 1's fused qkv [in = 48, out = 48 + 24 + 24]: input 5's output
  // Q + 3 is k_proj's [3, 5].
  const size_t qkv = c.qkv_dim(), q = c.q_dim();
  std::vector<float> fused(w.layers[1].attn_qkv_weight,
                           w.layers[1].attn_qkv_weight + qkv * c.n_embd);
  fused[5 * qkv + q + 3] = 1e6f;
  w.layers[1].attn_qkv_weight = fused.data();
  try {
    convert_weights(w, WeightFormat::kF16);
    FAIL() << "1e6 was accepted in f16";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "model-dir: tensor model.layers.1.self_attn.k_proj.weight at [3, 5] holds "
                 "1000000.000000, beyond f16's range (65504); load it with --weights bf16 or f32");
  }
}

// The KV cache holds the KV heads only: bytes per token =
// 2 * n_layer * n_kv_heads * head_dim * bytes, and the cost model agrees.
TEST(LlamaKvCache, HoldsTheKvHeadsOnly) {
  auto engine = engine_for("llama-gqa4-theta");
  const ModelConfig& cfg = engine->config();
  const KvCacheShape& s = engine->cache().shape();
  EXPECT_EQ(s.n_head, 2);
  EXPECT_EQ(s.head_dim, 6);
  EXPECT_EQ(s.bytes_per_block_per_layer(), int64_t(2) * s.block_size * 2 * 6 * 4);
  const StepCost cost = estimate_step_cost(cfg, {{0, 10, 1}});
  EXPECT_EQ(cost.kv_write_bytes, double(cfg.n_layer) * 2 * 10 * 2 * 6 * 4);
  EXPECT_EQ(cost.kv_read_bytes, cost.kv_write_bytes);
  const BackendMemory m = engine->backend().memory();
  EXPECT_EQ(m.kv_reserved_bytes,
            int64_t(s.num_blocks) * s.bytes_per_block_per_layer() * cfg.n_layer);
  // The memory report (tokenscope-cli --memory) states the same per token.
  EXPECT_EQ(memory_report(*engine).kv_bytes_per_token, int64_t(cfg.n_layer) * 2 * 2 * 6 * 4);
  // Weights read once per step: the file's parameters (no biases, no wpe).
  const StepCost decode = estimate_step_cost(cfg, {{10, 1, 1}});
  EXPECT_NEAR(decode.weight_bytes, 4.0 * (cfg.parameter_count() + cfg.n_embd), 1.0);
}

// The CUDA backend runs the Llama family: a failure to make one names the
// device or the build, never the model family; without a usable device,
// "auto" runs on the CPU.
TEST(LlamaBackend, CudaDoesNotRefuseTheFamily) {
  auto w = std::make_shared<const ModelWeights>(load_model(model_dir("qwen2-mha")));
  EXPECT_EQ(error_of([&] { make_backend("cuda", w); }).find("model_type"), std::string::npos);
  const BackendSelection sel = make_backend("auto", w);
  EXPECT_TRUE(sel.backend->name() == "cuda" || sel.notice.find("CUDA") != std::string::npos)
      << sel.notice;
}

// A config the forward pass does not implement is refused in one line
// naming the field.
TEST(LlamaConfig, RefusalsNameTheField) {
  const nlohmann::json base = {{"model_type", "llama"},    {"vocab_size", 100},
                               {"hidden_size", 32},        {"intermediate_size", 64},
                               {"num_hidden_layers", 2},   {"num_attention_heads", 4},
                               {"num_key_value_heads", 2}, {"max_position_embeddings", 64}};
  const ModelConfig ok = parse_config_json(base.dump(), "c.json");
  EXPECT_EQ(ok.kv_heads(), 2);
  EXPECT_EQ(ok.layer_norm_epsilon, 1e-6f);
  EXPECT_EQ(ok.rope_theta, 10000.0f);
  EXPECT_FALSE(ok.tied_embeddings);
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* says;
  };
  const Case cases[] = {
      {"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}, "field rope_scaling"},
      {"hidden_act", "gelu", "field hidden_act"},
      {"attention_bias", true, "field attention_bias"},
      {"mlp_bias", true, "field mlp_bias"},
      {"use_sliding_window", true, "field use_sliding_window"},
      {"num_key_value_heads", 3, "field num_key_value_heads"},
      {"num_key_value_heads", 0, "field num_key_value_heads is 0"},
      {"rope_theta", -1, "field rope_theta"},
      {"rms_norm_eps", 0, "field rms_norm_eps"},
      {"head_dim", 7, "head size 7 is odd"},
      {"model_type", "mistral", "field model_type"},
      {"hidden_size", nullptr, "missing field hidden_size"},
      {"head_dim", 40000, "num_attention_heads x head_dim is 160000"},
      {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}, "field rope_scaling"},
      {"partial_rotary_factor", 0.5, "field partial_rotary_factor"},
      {"rope_parameters", {{"rope_type", "llama3"}}, "field rope_parameters.rope_type"},
      {"rope_parameters",
       {{"rope_type", "default"}, {"partial_rotary_factor", 0.25}},
       "field rope_parameters.partial_rotary_factor"},
      {"rope_parameters", {{"rope_theta", 0.5}}, "field rope_parameters.rope_theta"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = base;
    j[c.field] = c.value;
    if (c.value.is_null()) j.erase(c.field);
    const std::string what = error_of([&] { parse_config_json(j.dump(), "c.json"); });
    EXPECT_EQ(what.rfind("c.json: ", 0), 0u) << c.field << " accepted or misnamed: " << what;
    EXPECT_NE(what.find(c.says), std::string::npos) << what;
  }
  // Newer transformers move rope_theta into rope_parameters; rope_scaling
  // that names the default type is plain RoPE.
  nlohmann::json nested = base;
  nested["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  nested["rope_scaling"] = {{"rope_type", "default"}};
  nested["partial_rotary_factor"] = 1.0;
  EXPECT_EQ(parse_config_json(nested.dump(), "c.json").rope_theta, 1000000.0f);
  // Qwen2 takes q/k/v biases itself: attention_bias is not its field.
  nlohmann::json q = base;
  q["model_type"] = "qwen2";
  q["attention_bias"] = true;
  EXPECT_EQ(parse_config_json(q.dump(), "c.json").family, ModelFamily::kQwen2);
}

// A checkpoint that does not match its config names the file and tensor.
TEST(LlamaWeights, MismatchedCheckpointsAreRefused) {
  const fs::path dir = fs::path(::testing::TempDir()) / "llama_mismatch";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy(model_dir("llama-gqa2"), dir, fs::copy_options::recursive);
  std::ifstream in(dir / "config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  in.close();
  cfg["num_key_value_heads"] = 6;  // the file's k_proj holds 3 heads
  std::ofstream(dir / "config.json") << cfg.dump();
  EXPECT_NE(error_of([&] {
              load_model(dir);
            }).find("model.safetensors: tensor model.layers.0.self_attn.k_proj.weight"),
            std::string::npos);
  cfg["num_key_value_heads"] = 3;
  cfg["num_hidden_layers"] = 1;
  std::ofstream(dir / "config.json") << cfg.dump();
  EXPECT_NE(error_of([&] { load_model(dir); }).find("unexpected tensor model.layers.1."),
            std::string::npos);
  fs::remove_all(dir);
}

// A sharded checkpoint's index must name every tensor, each in its shard.
TEST(LlamaWeights, ShardIndexIsChecked) {
  const fs::path dir = fs::path(::testing::TempDir()) / "llama_shards";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy(model_dir("qwen2-sharded"), dir, fs::copy_options::recursive);
  const fs::path index = dir / "model.safetensors.index.json";
  std::ifstream in(index);
  const nlohmann::json original = nlohmann::json::parse(in);
  in.close();
  const std::string name = "model.norm.weight";
  const std::string shard = original["weight_map"][name];
  const std::string other = shard == "model-00001-of-00002.safetensors"
                                ? "model-00002-of-00002.safetensors"
                                : "model-00001-of-00002.safetensors";
  nlohmann::json j = original;
  j["weight_map"][name] = other;
  std::ofstream(index) << j.dump();
  EXPECT_NE(error_of([&] {
              load_model(dir);
            }).find(shard + ": tensor " + name + " is here, but the index names " + other),
            std::string::npos);
  j = original;
  j["weight_map"].erase(name);
  std::ofstream(index) << j.dump();
  EXPECT_NE(error_of([&] { load_model(dir); }).find(name + " is not in the index"),
            std::string::npos);
  j = original;
  j["weight_map"]["model.extra.weight"] = shard;
  std::ofstream(index) << j.dump();
  EXPECT_NE(error_of([&] { load_model(dir); }).find("missing tensor model.extra.weight"),
            std::string::npos);
  std::ofstream(index) << "{\"weight_map\": []}";
  EXPECT_NE(error_of([&] { load_model(dir); }).find("missing field weight_map"), std::string::npos);
  std::ofstream(index) << original.dump();
  EXPECT_EQ(load_model(dir).config.family, ModelFamily::kQwen2);
  fs::remove_all(dir);
}

// A multi-branch pass (lookahead's positions and mask) rotates each token
// by its own position: a branch fed beside another gives the logits of that
// branch run alone.
TEST(LlamaBackend, MaskedPassUsesEachTokensPosition) {
  auto engine = engine_for("llama-gqa2");
  const int v = engine->config().vocab_size;
  const std::vector<int> prefix = {31, 250, 7, 456};
  const SeqId seq = engine->cache().create();
  engine->forward({{seq, prefix}}, {});
  ForwardRequest pass(seq, {102, 88, 300});
  pass.positions = {4, 5, 4};               // x at 4, y after x, z at 4 again
  pass.mask = {1, 0, 0, 1, 1, 0, 0, 0, 1};  // x | x y | z
  ForwardOptions o;
  o.all_logits = true;
  const ForwardResult r = engine->forward({pass}, o);
  const auto alone = [&](std::vector<int> tail) {
    std::vector<int> ids = prefix;
    ids.insert(ids.end(), tail.begin(), tail.end());
    return engine->forward_scratch(ids, {}).outputs[0].logits;
  };
  const std::vector<float>& got = r.outputs[0].logits;
  expect_close(got.data() + 1 * v, alone({102, 88}).data(), v, "branch x y");
  expect_close(got.data() + 2 * v, alone({300}).data(), v, "branch z");
}

}  // namespace
}  // namespace ts

namespace ts {
namespace {

// A model directory whose tokenizer is a Hugging Face tokenizer.json alone
// (no vocab.json / merges.txt) loads: the tokenizer.json written here holds
// the fixture's own vocabulary and merges with GPT-2's byte-level
// pre-tokenizer, so every prompt gets the same ids as from the GPT-2 files,
// and the model the same logits.
TEST(LlamaSetup, ADirectoryWithOnlyATokenizerJsonLoads) {
  const fs::path src = model_dir("llama-gqa2");
  test::TempDir dir("tokenscope-llama-tokjson");
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(src / f, dir / f);
  std::ifstream vocab_in(src / "vocab.json");
  const nlohmann::json vocab = nlohmann::json::parse(vocab_in);
  std::ifstream merges_in(src / "merges.txt");
  std::vector<std::string> merges;
  for (std::string line; std::getline(merges_in, line);)
    if (!line.empty() && line.rfind("#version", 0) != 0) merges.push_back(line);
  const nlohmann::json byte_level = {{"type", "ByteLevel"},
                                     {"add_prefix_space", false},
                                     {"trim_offsets", true},
                                     {"use_regex", true}};
  const nlohmann::json tok = {{"version", "1.0"},
                              {"normalizer", nullptr},
                              {"pre_tokenizer", byte_level},
                              {"post_processor", nullptr},
                              {"decoder", byte_level},
                              {"added_tokens", nlohmann::json::array()},
                              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  test::write_file(dir / "tokenizer.json", tok.dump());

  const LoadedModel plain = test::load_model(src);
  const LoadedModel json_only = test::load_model(dir.path());
  ASSERT_EQ(json_only.tokenizer->vocab_size(), plain.tokenizer->vocab_size());
  for (const char* prompt : {"Hello world", "  two  spaces\n\nand 1234 digits", "caf\xc3\xa9 ok"}) {
    SCOPED_TRACE(prompt);
    const std::vector<int> ids = plain.tokenizer->encode_ids(prompt);
    ASSERT_EQ(json_only.tokenizer->encode_ids(prompt), ids);
    const SeqId a = plain.engine->cache().create();
    const SeqId b = json_only.engine->cache().create();
    const auto la = plain.engine->forward({ForwardRequest{a, ids}}, ForwardOptions{});
    const auto lb = json_only.engine->forward({ForwardRequest{b, ids}}, ForwardOptions{});
    EXPECT_EQ(la.outputs.front().logits, lb.outputs.front().logits);
    plain.engine->cache().release(a);
    json_only.engine->cache().release(b);
  }
}

}  // namespace
}  // namespace ts

namespace ts {
namespace {

// A Llama model directory with both tokenizer forms: vocab.json + merges.txt
// (the fixture's) and a tokenizer.json that differs from them the way real
// Qwen2 / SmolLM2 files do: its own split regex, an added "<s>" the
// post-processor puts first (BOS), and one token fewer than config.json's
// vocab_size (a padding row of the embedding no token maps to).
constexpr const char* kSplit = " ?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+|\\s+";

fs::path padded_bos_model(const test::TempDir& dir) {
  const fs::path src = model_dir("llama-gqa2");
  for (const char* f : {"config.json", "model.safetensors", "vocab.json", "merges.txt"})
    fs::copy_file(src / f, dir / f);
  std::ifstream vocab_in(src / "vocab.json");
  nlohmann::json vocab = nlohmann::json::parse(vocab_in);
  // Ids 455 ("akes", the last merge's result) and 456 (<|endoftext|>) leave
  // the model's vocabulary; "<s>" takes 455 as an added token.
  std::vector<std::string> merges;
  std::ifstream merges_in(src / "merges.txt");
  for (std::string line; std::getline(merges_in, line);)
    if (!line.empty() && line.rfind("#version", 0) != 0 && line != "ak es") merges.push_back(line);
  vocab.erase("akes");
  vocab.erase("<|endoftext|>");
  const nlohmann::json pre = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", kSplit}}}, {"behavior", "Isolated"}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  const nlohmann::json post = {{"type", "TemplateProcessing"},
                               {"single",
                                {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                               {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {455}}}}}}};
  const nlohmann::json tok = {
      {"version", "1.0"},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer", pre},
      {"post_processor", post},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", {{{"id", 455}, {"content", "<s>"}, {"special", true}}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  test::write_file(dir / "tokenizer.json", tok.dump());
  return dir.path();
}

TEST(LlamaSetup, PrefersTokenizerJsonWithBosAndPadding) {
  test::TempDir dir("tokenscope-llama-bos");
  const LoadedModel m = test::load_model(padded_bos_model(dir));
  // tokenizer.json, not vocab.json: its split regex and its BOS.
  EXPECT_EQ(m.tokenizer->split_patterns(), std::vector<std::string>{kSplit});
  ASSERT_TRUE(m.tokenizer->adds_bos());
  EXPECT_EQ(m.tokenizer->bos_id(), 455);
  EXPECT_EQ(m.tokenizer->token_count(), 456);
  EXPECT_EQ(m.tokenizer->vocab_size(), 457);
  EXPECT_EQ(m.engine->config().vocab_size, 457);

  // The session's prompt starts with BOS, shown as a token of no bytes, and
  // prefill feeds exactly model_input_ids().
  Session s(m.tokenizer, m.engine, SessionOptions{});
  s.set_prompt("Hello world");
  ASSERT_GE(s.prompt_tokens().size(), 2u);
  EXPECT_EQ(s.prompt_tokens()[0].id, 455);
  EXPECT_EQ(s.prompt_tokens()[0].byte_end, 0u);
  EXPECT_EQ(s.prompt_ids(), m.tokenizer->model_input_ids("Hello world"));
  s.set_strategies({SamplingParams{}});
  s.prefill();
  s.step();

  // The session file records the family and the tokenizer: the reopened
  // session splits, starts prompts and counts parameters as the live one.
  const std::string text =
      session_to_json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const ImportedSession got = import_session_text(text, "mem.json");
  EXPECT_EQ(got.full.config.family, ModelFamily::kLlama);
  EXPECT_EQ(got.full.config.parameter_count(), m.engine->config().parameter_count());
  EXPECT_EQ(got.full.config.kv_heads(), m.engine->config().kv_heads());
  EXPECT_EQ(got.full.tokenizer->split_patterns(), std::vector<std::string>{kSplit});
  EXPECT_TRUE(got.full.tokenizer->adds_bos());
  EXPECT_TRUE(got.full.tokenizer->nfc_normalizer());
  EXPECT_EQ(got.full.tokenizer->vocab_size(), 457);
  EXPECT_EQ(got.full.tokenizer->encode_prompt("a <s>b").size(),
            m.tokenizer->encode_prompt("a <s>b").size());
  EXPECT_EQ(got.full.prompt_tokens.size(), s.prompt_tokens().size());
}

// --score feeds the prompt as the session does: BOS first. With no prompt,
// BOS is the context and every token of the text is scored.
TEST(LlamaSetup, ScoreStartsWithBos) {
  test::TempDir dir("tokenscope-llama-bos-score");
  const LoadedModel m = test::load_model(padded_bos_model(dir));
  const ScoreResult with_prompt = score_text(*m.engine, *m.tokenizer, "Hello", " world", 3);
  ASSERT_FALSE(with_prompt.tokens.empty());
  EXPECT_EQ(with_prompt.tokens.front(), 455);
  EXPECT_EQ(with_prompt.context_tokens, int(m.tokenizer->model_input_ids("Hello").size()));
  const ScoreResult whole = score_text(*m.engine, *m.tokenizer, "", "Hello world", 3);
  EXPECT_EQ(whole.tokens.front(), 455);
  EXPECT_EQ(whole.context_tokens, 1);
}

// A tokenizer with more tokens than config.json's vocab_size is refused.
TEST(LlamaSetup, TokenizerLargerThanVocabSizeIsRefused) {
  test::TempDir dir("tokenscope-llama-small-vocab");
  padded_bos_model(dir);
  std::ifstream in(dir / "config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  in.close();
  cfg["vocab_size"] = 455;
  test::write_file(dir / "config.json", cfg.dump());
  const std::string what = error_of([&] { test::load_model(dir.path()); });
  EXPECT_NE(what.find("vocab_size 455 is smaller than the tokenizer"), std::string::npos) << what;
}

TEST(LlamaWeights, MemoryCheckNamesTheSizes) {
  EXPECT_NO_THROW(check_llama_memory(int64_t{1} << 30, -1, "d"));
  EXPECT_NO_THROW(check_llama_memory(int64_t{1} << 30, int64_t{2} << 30, "d"));
  const std::string what =
      error_of([] { check_llama_memory(int64_t{3} << 30, int64_t{1} << 30, "d"); });
  EXPECT_EQ(what,
            "d: the weights need 3.0 GiB as 32-bit floats, more than the 1.0 GiB of memory "
            "available");
}

}  // namespace
}  // namespace ts

namespace ts {
namespace {

// Loading a BF16 checkpoint converts it tensor by tensor and releases each
// one's mapped pages: the peak is about the fp32 buffer, not the buffer plus
// the whole mapped file. Measured in a child process (its VmHWM starts at its
// resident size when forked).
TEST(LlamaWeights, Bf16LoadIsNotResidentTwice) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer's shadow of every written byte counts in the resident
  // size (792 MB of growth for this 110 MB load under it): the release and
  // ASan runs check the peak.
  GTEST_SKIP() << "the resident size under ThreadSanitizer includes its shadow memory";
#endif
  ModelConfig cfg;
  cfg.family = ModelFamily::kLlama;
  cfg.vocab_size = 512;
  cfg.n_ctx = 64;
  cfg.n_embd = 256;
  cfg.n_head = 4;
  cfg.n_kv_head = 4;
  cfg.n_layer = 8;
  cfg.n_inner = 4096;
  cfg.tied_embeddings = true;
  test::TempDir dir("tokenscope-llama-peak");
  std::vector<test::RawTensor> tensors;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    tensors.push_back({std::move(name), "BF16", std::move(shape),
                       std::vector<uint8_t>(static_cast<size_t>(n) * 2, 0)});
  };
  const int64_t C = cfg.n_embd, I = cfg.n_inner;
  add("model.embed_tokens.weight", {cfg.vocab_size, C});
  add("model.norm.weight", {C});
  for (int l = 0; l < cfg.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {C});
    add(p + "post_attention_layernorm.weight", {C});
    for (const char* m : {"q", "k", "v", "o"}) add(p + "self_attn." + m + "_proj.weight", {C, C});
    add(p + "mlp.gate_proj.weight", {I, C});
    add(p + "mlp.up_proj.weight", {I, C});
    add(p + "mlp.down_proj.weight", {C, I});
  }
  test::write_safetensors(dir / "model.safetensors", tensors);
  tensors.clear();
  tensors.shrink_to_fit();
  const int64_t fp32_bytes = cfg.parameter_count() * 4;  // ~104 MB; the file is half

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int64_t start = ProcFields::read("/proc/self/status").bytes("VmRSS");
    int64_t peak = -1;
    try {
      const ModelWeights w = load_llama_dir(dir.path(), cfg);
      peak = ProcFields::read("/proc/self/status").bytes("VmHWM");
    } catch (...) {
      ::_exit(3);
    }
    const int64_t grew = peak - start;
    std::fprintf(stderr, "fp32 %lld, peak growth %lld\n", static_cast<long long>(fp32_bytes),
                 static_cast<long long>(grew));
    // Both copies at once would be 1.5 x the fp32 bytes.
    ::_exit(grew < fp32_bytes * 5 / 4 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the load's peak holds the weights twice (see stderr)";
}

}  // namespace
}  // namespace ts
