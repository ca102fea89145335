#include "model/llama_loader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/mapped_file.h"
#include "model/safetensors.h"
#include "util/anonymous_memory.h"
#include "util/error.h"
#include "util/proc_fields.h"

namespace ts {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw Error(file + ": " + what);
}

// The shard files: model.safetensors alone, or those the index's weight_map
// names (each a plain file name in the directory). `shard_of` gets the
// index's tensor -> file map.
std::vector<fs::path> shard_files(const fs::path& dir,
                                  std::map<std::string, std::string>* shard_of) {
  std::error_code ec;
  if (fs::exists(dir / "model.safetensors", ec)) return {dir / "model.safetensors"};
  const fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index, ec)) fail((dir / "model.safetensors").string(), "not found");
  const std::string file = index.string();
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(read_regular_file(index, 64u << 20, "a safetensors index"));
  } catch (const nlohmann::json::exception&) {
    fail(file, "not valid JSON");
  }
  if (!root.is_object() || !root.contains("weight_map") || !root["weight_map"].is_object())
    fail(file, "missing field weight_map (an object of tensor name -> shard file)");
  std::vector<fs::path> shards;
  for (const auto& [name, value] : root["weight_map"].items()) {
    if (!value.is_string()) fail(file, "weight_map entry " + printable(name) + " is not a string");
    const std::string shard = value.get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      fail(file, "weight_map entry " + printable(name) + " names " + printable(shard) +
                     ", not a file in the model's directory");
    (*shard_of)[name] = shard;
    if (std::find(shards.begin(), shards.end(), dir / shard) == shards.end())
      shards.push_back(dir / shard);
  }
  if (shards.empty()) fail(file, "weight_map is empty");
  return shards;
}

// Where a tensor's values go: `rows` x `cols` of the source ([out, in] when
// transposed) into dst with leading dimension ld, starting at column col0.
struct Want {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;  // floats into the buffer
  int64_t ld = 0;     // dst row length (transposed: the fused width)
  int64_t col0 = 0;   // first dst column (transposed only)
  bool transpose = false;
};

}  // namespace

void check_llama_memory(int64_t weight_bytes, int64_t available_bytes, const std::string& dir) {
  if (available_bytes < 0 || weight_bytes <= available_bytes) return;
  const auto gib = [](int64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1ll << 30));
    return std::string(buf);
  };
  fail(dir, "the weights need " + gib(weight_bytes) + " as 32-bit floats, more than the " +
                gib(available_bytes) + " of memory available");
}

ModelWeights load_llama_dir(const fs::path& dir, const ModelConfig& cfg) {
  std::map<std::string, std::string> shard_of;
  const std::vector<fs::path> paths = shard_files(dir, &shard_of);
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, std::pair<const TensorInfo*, const SafetensorsFile*>, std::less<>> by_name;
  for (const fs::path& p : paths) {
    files.push_back(std::make_unique<SafetensorsFile>(p, MappedFile::Populate::kNo));
    for (const TensorInfo& t : files.back()->tensors()) {
      auto [it, inserted] = by_name.emplace(t.name, std::make_pair(&t, files.back().get()));
      if (!inserted)
        fail(files.back()->name(), "tensor " + printable(t.name) + " appears again (also in " +
                                       it->second.second->name() + ")");
      if (shard_of.empty()) continue;
      const auto named = shard_of.find(t.name);
      if (named == shard_of.end())
        fail(files.back()->name(), "tensor " + printable(t.name) + " is not in the index");
      if (named->second != p.filename().string())
        fail(files.back()->name(), "tensor " + printable(t.name) +
                                       " is here, but the index names " + printable(named->second));
    }
  }
  for (const auto& [name, shard] : shard_of)
    if (by_name.count(name) == 0)
      fail((dir / shard).string(), "missing tensor " + printable(name) + " (named by the index)");

  const int64_t V = cfg.vocab_size, C = cfg.n_embd, Q = cfg.q_dim(), KV = cfg.kv_dim(),
                QKV = cfg.qkv_dim(), I = cfg.mlp_dim();
  const int L = cfg.n_layer;
  const bool qwen2 = cfg.family == ModelFamily::kQwen2;

  // Each destination's place in one buffer, each at a 64-byte boundary.
  size_t total = 0;
  auto reserve = [&](size_t floats) {
    const size_t at = total;
    total += (floats + 15) / 16 * 16;
    return at;
  };
  std::vector<Want> wants;
  auto plain = [&](std::string name, std::vector<int64_t> shape, size_t offset) {
    wants.push_back({std::move(name), std::move(shape), offset, 0, 0, false});
  };
  auto linear = [&](std::string name, int64_t out, int64_t in, size_t offset, int64_t ld,
                    int64_t col0) {
    wants.push_back({std::move(name), {out, in}, offset, ld, col0, true});
  };
  const size_t wte = reserve(V * C), norm = reserve(C);
  const size_t lm_head = cfg.tied_embeddings ? 0 : reserve(V * C);
  plain("model.embed_tokens.weight", {V, C}, wte);
  plain("model.norm.weight", {C}, norm);
  if (!cfg.tied_embeddings) plain("lm_head.weight", {V, C}, lm_head);
  struct LayerOffsets {
    size_t ln1, ln2, qkv, qkv_bias, proj, fc, down;
  };
  std::vector<LayerOffsets> lo(L);
  for (int l = 0; l < L; ++l) {
    LayerOffsets& o = lo[l];
    o.ln1 = reserve(C);
    o.ln2 = reserve(C);
    o.qkv = reserve(C * QKV);
    o.qkv_bias = qwen2 ? reserve(QKV) : 0;
    o.proj = reserve(Q * C);
    o.fc = reserve(C * 2 * I);
    o.down = reserve(I * C);
    const std::string p = "model.layers." + std::to_string(l) + ".";
    plain(p + "input_layernorm.weight", {C}, o.ln1);
    plain(p + "post_attention_layernorm.weight", {C}, o.ln2);
    linear(p + "self_attn.q_proj.weight", Q, C, o.qkv, QKV, 0);
    linear(p + "self_attn.k_proj.weight", KV, C, o.qkv, QKV, Q);
    linear(p + "self_attn.v_proj.weight", KV, C, o.qkv, QKV, Q + KV);
    if (qwen2) {
      plain(p + "self_attn.q_proj.bias", {Q}, o.qkv_bias);
      plain(p + "self_attn.k_proj.bias", {KV}, o.qkv_bias + Q);
      plain(p + "self_attn.v_proj.bias", {KV}, o.qkv_bias + Q + KV);
    }
    linear(p + "self_attn.o_proj.weight", C, Q, o.proj, C, 0);
    linear(p + "mlp.gate_proj.weight", I, C, o.fc, 2 * I, 0);
    linear(p + "mlp.up_proj.weight", I, C, o.fc, 2 * I, I);
    linear(p + "mlp.down_proj.weight", C, I, o.down, C, 0);
  }

  // Unexpected tensors first: a config / file mismatch usually shows here.
  std::map<std::string_view, const Want*> wanted;
  for (const Want& want : wants) wanted.emplace(want.name, &want);
  for (const auto& [name, t] : by_name) {
    if (wanted.count(name)) continue;
    if (name.size() > 21 && name.ends_with(".rotary_emb.inv_freq")) continue;
    if (name == "lm_head.weight" && cfg.tied_embeddings) continue;  // HF ties it at load too
    fail(t.second->name(), "unexpected tensor " + printable(name) + " (config.json: " +
                               family_name(cfg.family) + ", " + std::to_string(L) + " layers" +
                               (cfg.tied_embeddings ? ", tied lm_head" : "") + ")");
  }

  check_llama_memory(int64_t(total * sizeof(float)),
                     ProcFields::read("/proc/meminfo").bytes("MemAvailable"), dir.string());
  auto buffer = std::make_shared<AnonymousMemory>(total, "weights", AnonymousMemory::Pages::kHuge);
  float* base = buffer->data();
  std::string dtype;
  std::vector<float> scratch;
  for (const Want& want : wants) {
    auto it = by_name.find(want.name);
    if (it == by_name.end()) fail(files.front()->name(), "missing tensor " + want.name);
    const TensorInfo& t = *it->second.first;
    const std::string& file = it->second.second->name();
    if (t.shape != want.shape) {
      std::vector<int64_t> s = want.shape;
      std::string expected = "[";
      for (size_t i = 0; i < s.size(); ++i) expected += (i ? ", " : "") + std::to_string(s[i]);
      fail(file, "tensor " + printable(t.name) + ": shape " + t.shape_string() +
                     " does not match config.json (expected " + expected + "])");
    }
    if (t.dtype == DType::Unsupported)
      fail(file, "tensor " + printable(t.name) + ": unsupported dtype " +
                     printable(t.dtype_string, 20) + " (supported: F32, F16, BF16)");
    dtype = dtype.empty() || dtype == dtype_name(t.dtype) ? dtype_name(t.dtype) : "mixed";
    const size_t n = static_cast<size_t>(t.numel());
    float* dst = base + want.offset;
    if (!want.transpose) {
      SafetensorsFile::to_f32(t, dst);
    } else {
      scratch.resize(n);
      SafetensorsFile::to_f32(t, scratch.data());
    }
    // The file's pages of this tensor leave the process (as the GPT-2
    // loader does): the model is never resident twice, as mapped BF16 / F32
    // pages plus the converted copy.
    it->second.second->file().release(t.data, static_cast<size_t>(t.nbytes()));
    const float* values = want.transpose ? scratch.data() : dst;
    for (size_t i = 0; i < n; ++i)
      if (!std::isfinite(values[i]))
        fail(file, "tensor " + printable(t.name) + " holds a non-finite value at element " +
                       std::to_string(i) + " of " + std::to_string(n) +
                       "; a model with non-finite weights gives NaN logits");
    if (want.transpose) {  // [out, in] -> columns col0.. of [in, ld], in cache-sized tiles
      const int64_t out = want.shape[0], in = want.shape[1];
      constexpr int64_t kTile = 32;
      for (int64_t o0 = 0; o0 < out; o0 += kTile)
        for (int64_t i0 = 0; i0 < in; i0 += kTile)
          for (int64_t o = o0; o < std::min(out, o0 + kTile); ++o)
            for (int64_t i = i0; i < std::min(in, i0 + kTile); ++i)
              dst[i * want.ld + want.col0 + o] = scratch[o * in + i];
    }
  }

  ModelWeights w;
  w.config = cfg;
  w.wte = base + wte;
  w.ln_f_weight = base + norm;
  if (!cfg.tied_embeddings) w.lm_head = base + lm_head;
  w.layers.resize(L);
  for (int l = 0; l < L; ++l) {
    LayerWeights& lw = w.layers[l];
    lw.ln_1_weight = base + lo[l].ln1;
    lw.ln_2_weight = base + lo[l].ln2;
    lw.attn_qkv_weight = base + lo[l].qkv;
    if (qwen2) lw.attn_qkv_bias = base + lo[l].qkv_bias;
    lw.attn_proj_weight = base + lo[l].proj;
    lw.mlp_fc_weight = base + lo[l].fc;
    lw.mlp_proj_weight = base + lo[l].down;
  }
  w.source = dir.string();
  w.storage_dtype = dtype;
  w.storage = std::move(buffer);
  return w;
}

}  // namespace ts
