#include "bench/random_checkpoint.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "model/tokenizer.h"
#include "util/error.h"

namespace ts::bench {
namespace {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  float stddev;  // 0: constant 1 (layer norm weights); -1: zeros (biases)
};

std::vector<TensorSpec> specs(const ModelConfig& c, int init_layers) {
  const int64_t C = c.n_embd;
  const float init = 0.02f, proj = 0.02f / std::sqrt(2.0f * init_layers);
  std::vector<TensorSpec> t = {{"wte.weight", {c.vocab_size, C}, init},
                               {"wpe.weight", {c.n_ctx, C}, 0.01f}};
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    t.push_back({p + "ln_1.weight", {C}, 0});
    t.push_back({p + "ln_1.bias", {C}, -1});
    t.push_back({p + "attn.c_attn.weight", {C, 3 * C}, init});
    t.push_back({p + "attn.c_attn.bias", {3 * C}, -1});
    t.push_back({p + "attn.c_proj.weight", {C, C}, proj});
    t.push_back({p + "attn.c_proj.bias", {C}, -1});
    t.push_back({p + "ln_2.weight", {C}, 0});
    t.push_back({p + "ln_2.bias", {C}, -1});
    t.push_back({p + "mlp.c_fc.weight", {C, 4 * C}, init});
    t.push_back({p + "mlp.c_fc.bias", {4 * C}, -1});
    t.push_back({p + "mlp.c_proj.weight", {4 * C, C}, proj});
    t.push_back({p + "mlp.c_proj.bias", {C}, -1});
  }
  t.push_back({"ln_f.weight", {C}, 0});
  t.push_back({"ln_f.bias", {C}, -1});
  return t;
}

// vocab.json of `size` tokens: byte b is token b (in GPT-2's printable
// alphabet), then the filler words "aa", "ab", ... (never produced by
// merges: merges.txt has none), then <|endoftext|>.
std::string byte_level_vocab(int size) {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (int b = 0; b < 256 && id < size - 1; ++b)
    vocab[bytes_to_gpt2_unicode(std::string(1, static_cast<char>(b)))] = id++;
  for (int len = 2; id < size - 1; ++len) {
    std::string word(static_cast<size_t>(len), 'a');
    for (;;) {
      if (id >= size - 1) break;
      vocab[word] = id++;
      int i = len - 1;  // next word of this length, like an odometer
      while (i >= 0 && word[i] == 'z') word[i--] = 'a';
      if (i < 0) break;
      ++word[i];
    }
  }
  vocab["<|endoftext|>"] = id;
  return vocab.dump();
}

}  // namespace

ModelConfig gpt2_124m_config() {
  ModelConfig c;
  c.vocab_size = 50257;
  c.n_ctx = 1024;
  c.n_embd = 768;
  c.n_head = 12;
  c.n_layer = 12;
  return c;
}

ModelConfig gpt2_355m_config() {
  ModelConfig c = gpt2_124m_config();
  c.n_embd = 1024;
  c.n_head = 16;
  c.n_layer = 24;
  return c;
}

ModelConfig gpt2_1558m_config() {
  ModelConfig c = gpt2_124m_config();
  c.n_embd = 1600;
  c.n_head = 25;
  c.n_layer = 48;
  return c;
}

void write_random_checkpoint(const ModelConfig& config, const std::filesystem::path& dir,
                             uint64_t seed, int init_layers) {
  namespace fs = std::filesystem;
  if (dir.empty()) throw Error("random checkpoint: the directory name is empty");
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    throw Error(dir.string() + ": exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir.string() + ": cannot create the directory (" + ec.message() + ")");
  const nlohmann::json cfg = {{"model_type", "gpt2"},
                              {"architectures", {"GPT2LMHeadModel"}},
                              {"activation_function", "gelu_new"},
                              {"vocab_size", config.vocab_size},
                              {"n_positions", config.n_ctx},
                              {"n_ctx", config.n_ctx},
                              {"n_embd", config.n_embd},
                              {"n_head", config.n_head},
                              {"n_layer", config.n_layer},
                              {"layer_norm_epsilon", config.layer_norm_epsilon}};
  {
    std::ofstream config_out(dir / "config.json");
    config_out << cfg.dump(2) << "\n";
    config_out.flush();
    if (!config_out)
      throw Error((dir / "config.json").string() + ": cannot write (" + std::strerror(errno) + ")");
  }

  for (const auto& [name, text] :
       {std::pair<const char*, std::string>{"vocab.json", byte_level_vocab(config.vocab_size)},
        std::pair<const char*, std::string>{"merges.txt", "#version: 0.2\n"}}) {
    std::ofstream out(dir / name, std::ios::binary);
    out << text;
    out.flush();
    if (!out) throw Error((dir / name).string() + ": cannot write (" + std::strerror(errno) + ")");
  }

  const std::vector<TensorSpec> tensors =
      specs(config, init_layers > 0 ? init_layers : config.n_layer);
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  int64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + n * 4}}};
    offset += n * 4;
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h += ' ';  // keeps the data 8-byte aligned
  std::ofstream out(dir / "model.safetensors", std::ios::binary);
  if (!out)
    throw Error((dir / "model.safetensors").string() + ": cannot open for writing (" +
                std::strerror(errno) + ")");
  const uint64_t len = h.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  std::mt19937_64 rng(seed);
  std::vector<float> buf;
  for (const TensorSpec& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    buf.resize(static_cast<size_t>(n));
    if (t.stddev > 0) {
      std::normal_distribution<float> dist(0.0f, t.stddev);
      for (float& v : buf) v = dist(rng);
    } else {
      std::fill(buf.begin(), buf.end(), t.stddev == 0 ? 1.0f : 0.0f);
    }
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(n * 4));
  }
  out.flush();
  if (!out)
    throw Error((dir / "model.safetensors").string() + ": write failed (" + std::strerror(errno) +
                ")");
}

}  // namespace ts::bench
