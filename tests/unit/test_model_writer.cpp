#include "test_model_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "model/half_float.h"

namespace ts::test {

namespace fs = std::filesystem;

namespace {

// splitmix64: tiny, portable, deterministic.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = uniform();
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(6.283185307179586 * u2);
    has_spare_ = true;
    return r * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t s_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

size_t numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

void append_le(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(uint8_t(v >> (8 * i)));
}

}  // namespace

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 61;
  c.n_ctx = 16;
  c.n_embd = 24;
  c.n_head = 4;
  c.n_layer = 2;
  c.layer_norm_epsilon = 1e-5f;
  return c;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> gpt2_tensor_shapes(
    const ModelConfig& config) {
  const int64_t V = config.vocab_size, T = config.n_ctx, C = config.n_embd;
  std::vector<std::pair<std::string, std::vector<int64_t>>> s = {{"wte.weight", {V, C}},
                                                                 {"wpe.weight", {T, C}}};
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    s.push_back({h + "ln_1.weight", {C}});
    s.push_back({h + "ln_1.bias", {C}});
    s.push_back({h + "attn.c_attn.weight", {C, 3 * C}});
    s.push_back({h + "attn.c_attn.bias", {3 * C}});
    s.push_back({h + "attn.c_proj.weight", {C, C}});
    s.push_back({h + "attn.c_proj.bias", {C}});
    s.push_back({h + "ln_2.weight", {C}});
    s.push_back({h + "ln_2.bias", {C}});
    s.push_back({h + "mlp.c_fc.weight", {C, 4 * C}});
    s.push_back({h + "mlp.c_fc.bias", {4 * C}});
    s.push_back({h + "mlp.c_proj.weight", {4 * C, C}});
    s.push_back({h + "mlp.c_proj.bias", {C}});
  }
  s.push_back({"ln_f.weight", {C}});
  s.push_back({"ln_f.bias", {C}});
  return s;
}

RandomGpt2 make_random_gpt2(const ModelConfig& config, uint32_t seed) {
  RandomGpt2 m;
  m.config = config;
  Rng rng(0x5EED0000ull ^ (uint64_t(seed) << 20) ^ seed);
  const double proj_std = 0.02 / std::sqrt(2.0 * std::max(1, config.n_layer));
  for (const auto& [name, shape] : gpt2_tensor_shapes(config)) {
    std::vector<float> v(numel(shape));
    const bool is_ln = name.find("ln_") != std::string::npos;
    double mean = 0.0, stddev = 0.02;
    if (is_ln && ends_with(name, ".weight")) {
      mean = 1.0;
      stddev = 0.1;
    } else if (ends_with(name, "c_proj.weight")) {
      stddev = proj_std;
    } else if (name == "wpe.weight") {
      stddev = 0.01;
    }
    for (float& x : v) x = float(mean + stddev * rng.normal());
    m.tensors.emplace(name, std::move(v));
  }
  return m;
}

ModelWeights as_model_weights(const RandomGpt2& model) {
  auto copy = std::make_shared<RandomGpt2>(model);
  auto p = [&copy](const std::string& name) { return copy->tensors.at(name).data(); };
  ModelWeights w;
  w.config = copy->config;
  w.wte = p("wte.weight");
  w.wpe = p("wpe.weight");
  w.ln_f_weight = p("ln_f.weight");
  w.ln_f_bias = p("ln_f.bias");
  w.layers.resize(copy->config.n_layer);
  for (int l = 0; l < copy->config.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    LayerWeights& lw = w.layers[l];
    lw.ln_1_weight = p(h + "ln_1.weight");
    lw.ln_1_bias = p(h + "ln_1.bias");
    lw.attn_qkv_weight = p(h + "attn.c_attn.weight");
    lw.attn_qkv_bias = p(h + "attn.c_attn.bias");
    lw.attn_proj_weight = p(h + "attn.c_proj.weight");
    lw.attn_proj_bias = p(h + "attn.c_proj.bias");
    lw.ln_2_weight = p(h + "ln_2.weight");
    lw.ln_2_bias = p(h + "ln_2.bias");
    lw.mlp_fc_weight = p(h + "mlp.c_fc.weight");
    lw.mlp_fc_bias = p(h + "mlp.c_fc.bias");
    lw.mlp_proj_weight = p(h + "mlp.c_proj.weight");
    lw.mlp_proj_bias = p(h + "mlp.c_proj.bias");
  }
  w.source = "random-gpt2";
  w.storage_dtype = "F32";
  w.storage = std::move(copy);
  return w;
}

const float* find_weight(const ModelWeights& w, const std::string& name) {
  if (name == "wte.weight") return w.wte;
  if (name == "wpe.weight") return w.wpe;
  if (name == "ln_f.weight") return w.ln_f_weight;
  if (name == "ln_f.bias") return w.ln_f_bias;
  if (name.rfind("h.", 0) != 0) return nullptr;
  const size_t dot = name.find('.', 2);
  if (dot == std::string::npos) return nullptr;
  const int l = std::atoi(name.substr(2, dot - 2).c_str());
  if (l < 0 || size_t(l) >= w.layers.size()) return nullptr;
  const LayerWeights& lw = w.layers[size_t(l)];
  const std::string rest = name.substr(dot + 1);
  const std::pair<const char*, const float*> fields[] = {
      {"ln_1.weight", lw.ln_1_weight},
      {"ln_1.bias", lw.ln_1_bias},
      {"attn.c_attn.weight", lw.attn_qkv_weight},
      {"attn.c_attn.bias", lw.attn_qkv_bias},
      {"attn.c_proj.weight", lw.attn_proj_weight},
      {"attn.c_proj.bias", lw.attn_proj_bias},
      {"ln_2.weight", lw.ln_2_weight},
      {"ln_2.bias", lw.ln_2_bias},
      {"mlp.c_fc.weight", lw.mlp_fc_weight},
      {"mlp.c_fc.bias", lw.mlp_fc_bias},
      {"mlp.c_proj.weight", lw.mlp_proj_weight},
      {"mlp.c_proj.bias", lw.mlp_proj_bias}};
  for (const auto& [field, ptr] : fields)
    if (rest == field) return ptr;
  return nullptr;
}

std::vector<float> round_trip(const std::vector<float>& values, DType dtype) {
  std::vector<float> out(values);
  if (dtype == DType::F16) {
    for (float& x : out) x = fp16_to_fp32(fp32_to_fp16(x));
  } else if (dtype == DType::BF16) {
    for (float& x : out) x = bf16_to_fp32(fp32_to_bf16(x));
  }
  return out;
}

std::vector<uint8_t> encode(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> out;
  out.reserve(values.size() * 4);
  for (float x : values) {
    switch (dtype) {
      case DType::F32:
        append_le(out, float_to_bits(x), 4);
        break;
      case DType::F16:
        append_le(out, fp32_to_fp16(x), 2);
        break;
      case DType::BF16:
        append_le(out, fp32_to_bf16(x), 2);
        break;
      case DType::Unsupported:
        throw std::invalid_argument("encode: unsupported dtype");
    }
  }
  return out;
}

nlohmann::json make_config_json(const ModelConfig& c) {
  return nlohmann::json{{"model_type", "gpt2"},
                        {"architectures", {"GPT2LMHeadModel"}},
                        {"vocab_size", c.vocab_size},
                        {"n_positions", c.n_ctx},
                        {"n_ctx", c.n_ctx},
                        {"n_embd", c.n_embd},
                        {"n_head", c.n_head},
                        {"n_layer", c.n_layer},
                        {"layer_norm_epsilon", c.layer_norm_epsilon},
                        {"activation_function", "gelu_new"},
                        {"tie_word_embeddings", true}};
}

void write_file(const fs::path& file, const std::vector<uint8_t>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

void write_file(const fs::path& file, const std::string& text) {
  write_file(file, std::vector<uint8_t>(text.begin(), text.end()));
}

std::vector<uint8_t> read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_safetensors(const fs::path& file, const std::vector<RawTensor>& tensors,
                       const SafetensorsWriteOptions& options) {
  nlohmann::json header = nlohmann::json::object();
  if (!options.metadata.empty()) header["__metadata__"] = options.metadata;
  uint64_t offset = 0;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  if (options.edit_header) options.edit_header(header);
  std::string text = options.raw_header ? *options.raw_header : header.dump();
  if (!options.raw_header) {
    // Pad with spaces (allowed by the format) to place the data section.
    const size_t target = options.misalign_data ? 2 : 0;
    while ((8 + text.size()) % 8 != target) text += ' ';
  }
  std::vector<uint8_t> bytes;
  append_le(bytes, options.header_length ? *options.header_length : text.size(), 8);
  bytes.insert(bytes.end(), text.begin(), text.end());
  for (const RawTensor& t : tensors) bytes.insert(bytes.end(), t.bytes.begin(), t.bytes.end());
  bytes.resize(bytes.size() - std::min(bytes.size(), options.truncate_bytes));
  write_file(file, bytes);
}

void write_hf_dir(const RandomGpt2& model, const fs::path& dir, const HfWriteOptions& options) {
  fs::create_directories(dir);
  if (options.write_config) {
    nlohmann::json config = make_config_json(model.config);
    if (options.edit_config) options.edit_config(config);
    write_file(dir / "config.json", config.dump(2));
  }
  const char* dtype = dtype_name(options.dtype);
  const std::string prefix = options.transformer_prefix ? "transformer." : "";
  std::vector<RawTensor> raw;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
    if (std::find(options.drop.begin(), options.drop.end(), name) != options.drop.end()) return;
    if (auto it = options.replace.find(name); it != options.replace.end()) values = it->second;
    if (auto it = options.reshape.find(name); it != options.reshape.end()) {
      shape = it->second;
      values.resize(numel(shape), 0.0f);
    }
    const std::string full = name == "lm_head.weight" ? name : prefix + name;
    raw.push_back({full, dtype, shape, encode(values, options.dtype)});
  };
  for (const auto& [name, shape] : gpt2_tensor_shapes(model.config)) {
    add(name, shape, model.at(name));
    if (options.attn_bias_buffers && ends_with(name, "attn.c_attn.weight")) {
      const std::string h = name.substr(0, name.size() - std::string("c_attn.weight").size());
      const int64_t T = model.config.n_ctx;
      std::vector<float> mask(size_t(T * T));
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j <= i; ++j) mask[size_t(i * T + j)] = 1.0f;
      add(h + "bias", {1, 1, T, T}, mask);
      add(h + "masked_bias", {}, {-1e4f});
    }
  }
  if (options.tied_lm_head) {
    add("lm_head.weight", {model.config.vocab_size, model.config.n_embd}, model.at("wte.weight"));
  }
  for (const auto& [name, shape] : options.extra) {
    raw.push_back({name, "F32", shape, encode(std::vector<float>(numel(shape)), DType::F32)});
  }
  write_safetensors(dir / "model.safetensors", raw, options.safetensors);
}

void write_llmc_bin(const RandomGpt2& model, const fs::path& file,
                    const LlmcWriteOptions& options) {
  const ModelConfig& c = model.config;
  const int V = c.vocab_size, C = c.n_embd, L = c.n_layer;
  const int Vp = options.padded_vocab >= 0 ? options.padded_vocab : (V + 127) / 128 * 128;
  std::array<int32_t, 256> header{};
  header[0] = 20240326;
  header[1] = options.version;
  header[2] = c.n_ctx;
  header[3] = V;
  header[4] = L;
  header[5] = c.n_head;
  header[6] = C;
  header[7] = Vp;
  if (options.edit_header) options.edit_header(header);

  std::vector<float> params;
  auto put = [&params](const std::vector<float>& v) {
    params.insert(params.end(), v.begin(), v.end());
  };
  // HF [in, out] -> llm.c [out, in]
  auto put_transposed = [&params](const std::vector<float>& v, size_t in, size_t out) {
    for (size_t o = 0; o < out; ++o)
      for (size_t i = 0; i < in; ++i) params.push_back(v[i * out + o]);
  };
  put(model.at("wte.weight"));
  for (int64_t i = int64_t(V) * C; i < int64_t(Vp) * C; ++i) params.push_back(options.pad_value);
  put(model.at("wpe.weight"));
  auto each = [&](const std::string& suffix, size_t in, size_t out) {
    for (int l = 0; l < L; ++l) {
      const auto& v = model.at("h." + std::to_string(l) + "." + suffix);
      if (in == 0)
        put(v);
      else
        put_transposed(v, in, out);
    }
  };
  const size_t uc = size_t(C);
  each("ln_1.weight", 0, 0);
  each("ln_1.bias", 0, 0);
  each("attn.c_attn.weight", uc, 3 * uc);
  each("attn.c_attn.bias", 0, 0);
  each("attn.c_proj.weight", uc, uc);
  each("attn.c_proj.bias", 0, 0);
  each("ln_2.weight", 0, 0);
  each("ln_2.bias", 0, 0);
  each("mlp.c_fc.weight", uc, 4 * uc);
  each("mlp.c_fc.bias", 0, 0);
  each("mlp.c_proj.weight", 4 * uc, uc);
  each("mlp.c_proj.bias", 0, 0);
  put(model.at("ln_f.weight"));
  put(model.at("ln_f.bias"));

  std::vector<uint8_t> bytes;
  for (int32_t h : header) append_le(bytes, uint32_t(h), 4);
  const std::vector<uint8_t> data = encode(params, options.version == 5 ? DType::BF16 : DType::F32);
  bytes.insert(bytes.end(), data.begin(), data.end());
  bytes.resize(bytes.size() - std::min(bytes.size(), options.truncate_bytes));
  bytes.insert(bytes.end(), options.extra_bytes, uint8_t(0));
  write_file(file, bytes);
}

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace ts::test
