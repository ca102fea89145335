#include "model/model_loader.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "model/config_json.h"
#include "model/half_float.h"
#include "model/llama_loader.h"
#include "model/llmc_loader.h"
#include "model/safetensors.h"
#include "util/anonymous_memory.h"
#include "util/error.h"
#include "util/proc_fields.h"

namespace ts {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPrefix = "transformer.";

// What ModelWeights::storage keeps alive for an HF directory.
struct WeightStorage {
  std::unique_ptr<AnonymousMemory> buffer;  // copied / converted tensors
  std::shared_ptr<SafetensorsFile> file;    // the populated map, when read in place
};

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw Error(file + ": " + what);
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// "h.<n>.<rest>" -> n (and rest); -1 when the name is not of that form.
long layer_of(std::string_view name, std::string_view* rest) {
  if (name.substr(0, 2) != "h.") return -1;
  size_t i = 2;
  long n = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i < 12) {
    n = n * 10 + (name[i] - '0');
    ++i;
  }
  if (i == 2 || i >= name.size() || name[i] != '.') return -1;
  if (name[2] == '0' && i > 3) return -1;  // no leading zeros
  *rest = name.substr(i + 1);
  return n;
}

// Value i of an F32/F16/BF16 tensor, whatever its alignment.
float value_at(const TensorInfo& t, size_t i) {
  if (t.dtype == DType::F32) {
    float f;
    std::memcpy(&f, t.data + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, t.data + 2 * i, 2);
  return t.dtype == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

bool same_values(const TensorInfo& a, const TensorInfo& b) {
  if (a.numel() != b.numel()) return false;
  if (a.dtype == b.dtype) return std::memcmp(a.data, b.data, a.nbytes()) == 0;
  const size_t n = static_cast<size_t>(a.numel());
  for (size_t i = 0; i < n; ++i) {
    const float x = value_at(a, i), y = value_at(b, i);
    if (std::memcmp(&x, &y, 4) != 0) return false;
  }
  return true;
}

// The tokenizer file in the model's own directory (the usual case; a
// tokenizer from another directory is checked and named by load_model_setup
// before this runs).
std::string tokenizer_file_name(const fs::path& dir) {
  std::error_code ec;
  for (const char* name : {"vocab.json", "encoder.json"}) {
    if (fs::exists(dir / name, ec)) return (dir / name).string();
  }
  return "the tokenizer";
}

// Index of the first NaN or infinity in p[0, n); n when there is none. An
// exponent of all ones is a NaN or an infinity: the largest magnitude's bits
// (a max reduction the compiler vectorises) find a block that holds one.
size_t first_non_finite(const float* p, size_t n) {
  constexpr size_t kBlock = 4096;
  constexpr uint32_t kExponent = 0x7F800000u;
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t end = std::min(n, begin + kBlock);
    uint32_t largest = 0;
    for (size_t i = begin; i < end; ++i) {
      uint32_t u;
      std::memcpy(&u, p + i, 4);
      largest = std::max(largest, u & 0x7FFFFFFFu);
    }
    if (largest < kExponent) continue;
    for (size_t i = begin; i < end; ++i)
      if (!std::isfinite(p[i])) return i;
  }
  return n;
}

// Throws the loaders' error for a tensor holding a NaN or an infinity at
// `first` (counted from there to the end of the tensor).
[[noreturn]] void fail_non_finite(const std::string& file, const std::string& name, const float* p,
                                  size_t n, size_t first) {
  size_t nan = 0, inf = 0;
  for (size_t i = first; i < n; ++i) {
    nan += std::isnan(p[i]) ? 1 : 0;
    inf += std::isinf(p[i]) ? 1 : 0;
  }
  std::string what;
  if (nan > 0) what = std::to_string(nan) + " NaN";
  if (inf > 0) what += (what.empty() ? "" : " and ") + std::to_string(inf) + " infinite";
  what += nan + inf == 1 ? " value" : " values";
  fail(file, "tensor " + printable(name) + " holds " + what + " (the first at element " +
                 std::to_string(first) + " of " + std::to_string(n) +
                 "); a model with non-finite weights gives NaN logits");
}

void check_finite(const std::string& file, const std::string& name, const float* p, size_t n) {
  if (const size_t first = first_non_finite(p, n); first < n)
    fail_non_finite(file, name, p, n, first);
}

}  // namespace

void check_weights_finite(const ModelWeights& w, const std::string& file,
                          std::string_view name_prefix) {
  const ModelConfig& c = w.config;
  const size_t V = static_cast<size_t>(c.vocab_size), T = static_cast<size_t>(c.n_ctx),
               C = static_cast<size_t>(c.n_embd);
  struct Tensor {
    std::string name;
    const float* data;
    size_t count;
  };
  std::vector<Tensor> tensors = {{"wte.weight", w.wte, V * C}, {"wpe.weight", w.wpe, T * C}};
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    const std::string h = "h." + std::to_string(l) + ".";
    tensors.push_back({h + "ln_1.weight", lw.ln_1_weight, C});
    tensors.push_back({h + "ln_1.bias", lw.ln_1_bias, C});
    tensors.push_back({h + "attn.c_attn.weight", lw.attn_qkv_weight, C * 3 * C});
    tensors.push_back({h + "attn.c_attn.bias", lw.attn_qkv_bias, 3 * C});
    tensors.push_back({h + "attn.c_proj.weight", lw.attn_proj_weight, C * C});
    tensors.push_back({h + "attn.c_proj.bias", lw.attn_proj_bias, C});
    tensors.push_back({h + "ln_2.weight", lw.ln_2_weight, C});
    tensors.push_back({h + "ln_2.bias", lw.ln_2_bias, C});
    tensors.push_back({h + "mlp.c_fc.weight", lw.mlp_fc_weight, C * 4 * C});
    tensors.push_back({h + "mlp.c_fc.bias", lw.mlp_fc_bias, 4 * C});
    tensors.push_back({h + "mlp.c_proj.weight", lw.mlp_proj_weight, 4 * C * C});
    tensors.push_back({h + "mlp.c_proj.bias", lw.mlp_proj_bias, C});
  }
  tensors.push_back({"ln_f.weight", w.ln_f_weight, C});
  tensors.push_back({"ln_f.bias", w.ln_f_bias, C});
  for (const Tensor& t : tensors)
    if (t.data != nullptr) check_finite(file, std::string(name_prefix) + t.name, t.data, t.count);
}

bool copies_weights(WeightPlacement placement, int64_t available_bytes, int64_t weight_bytes) {
  switch (placement) {
    case WeightPlacement::kCopy:
      return true;
    case WeightPlacement::kInPlace:
      return false;
    case WeightPlacement::kAuto:
      break;
  }
  return available_bytes < 0 || available_bytes / 2 >= weight_bytes;
}

ModelWeights load_model_dir(const fs::path& dir, int tokenizer_vocab_size,
                            WeightPlacement placement) {
  const std::string dir_name = dir.string();
  std::error_code ec;
  if (!fs::exists(dir, ec)) fail(dir_name, ec ? ec.message() : "no such directory");
  if (!fs::is_directory(dir, ec))
    fail(dir_name, "not a directory (expected a Hugging Face GPT-2 directory)");

  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path, ec)) {
    fail(config_path.string(),
         "not found (expected a Hugging Face GPT-2 directory with "
         "config.json and model.safetensors)");
  }
  const fs::path st_path = dir / "model.safetensors";
  if (!fs::exists(st_path, ec)) {
    // The Llama family loads shards; GPT-2 is read from one file only.
    const bool sharded = fs::exists(dir / "model.safetensors.index.json", ec);
    if (sharded && load_config_json(config_path).is_gpt2()) {
      fail(st_path.string(),
           "not found; sharded checkpoints (model.safetensors.index.json) are "
           "not supported for GPT-2, save the model as one model.safetensors");
    }
    if (!sharded && fs::exists(dir / "pytorch_model.bin", ec)) {
      fail(st_path.string(),
           "not found; pytorch_model.bin is not supported, convert it to "
           "safetensors (e.g. model.save_pretrained(dir, safe_serialization=True))");
    }
    if (!sharded) fail(st_path.string(), "not found");
  }

  const ModelConfig config = load_config_json(config_path);
  // A Llama-family embedding may have padding rows past the tokenizer's ids.
  if (tokenizer_vocab_size >= 0 && (config.is_gpt2() ? tokenizer_vocab_size != config.vocab_size
                                                     : tokenizer_vocab_size > config.vocab_size)) {
    fail(config_path.string(), "vocab_size " + std::to_string(config.vocab_size) +
                                   (config.is_gpt2() ? " does not match " : " is smaller than ") +
                                   tokenizer_file_name(dir) + " (" +
                                   std::to_string(tokenizer_vocab_size) + " tokens)");
  }
  if (!config.is_gpt2()) return load_llama_dir(dir, config);

  const int64_t weight_bytes = config.parameter_count() * int64_t(sizeof(float));
  const bool copy = copies_weights(
      placement, ProcFields::read("/proc/meminfo").bytes("MemAvailable"), weight_bytes);
  // A copy reads the map once, in order: no need to populate it first.
  auto st_owner = std::make_shared<SafetensorsFile>(
      st_path, copy ? MappedFile::Populate::kNo : MappedFile::Populate::kYes);
  const SafetensorsFile& st = *st_owner;
  const std::string& file = st.name();

  // Canonical name (prefix stripped) -> tensor.
  std::map<std::string, const TensorInfo*, std::less<>> by_name;
  bool prefixed = false;
  for (const TensorInfo& t : st.tensors()) {
    std::string key = t.name;
    if (key.compare(0, kPrefix.size(), kPrefix) == 0) {
      key.erase(0, kPrefix.size());
      prefixed = true;
    }
    auto [it, inserted] = by_name.emplace(key, &t);
    if (!inserted) {
      fail(file, "tensor " + printable(key) + " appears twice (as " + printable(it->second->name) +
                     " and " + printable(t.name) + ")");
    }
  }
  auto display = [&](const std::string& canonical) {
    return prefixed ? std::string(kPrefix) + canonical : canonical;
  };

  const int64_t V = config.vocab_size, T = config.n_ctx, C = config.n_embd;
  const int L = config.n_layer;

  // Every tensor the forward pass reads: name, expected shape, destination.
  ModelWeights w;
  w.config = config;
  w.layers.resize(L);
  struct Want {
    std::string name;
    std::vector<int64_t> shape;
    const float** dst;
  };
  std::vector<Want> wants = {
      {"wte.weight", {V, C}, &w.wte},
      {"wpe.weight", {T, C}, &w.wpe},
      {"ln_f.weight", {C}, &w.ln_f_weight},
      {"ln_f.bias", {C}, &w.ln_f_bias},
  };
  for (int l = 0; l < L; ++l) {
    LayerWeights& lw = w.layers[l];
    const std::string h = "h." + std::to_string(l) + ".";
    wants.push_back({h + "ln_1.weight", {C}, &lw.ln_1_weight});
    wants.push_back({h + "ln_1.bias", {C}, &lw.ln_1_bias});
    wants.push_back({h + "attn.c_attn.weight", {C, 3 * C}, &lw.attn_qkv_weight});
    wants.push_back({h + "attn.c_attn.bias", {3 * C}, &lw.attn_qkv_bias});
    wants.push_back({h + "attn.c_proj.weight", {C, C}, &lw.attn_proj_weight});
    wants.push_back({h + "attn.c_proj.bias", {C}, &lw.attn_proj_bias});
    wants.push_back({h + "ln_2.weight", {C}, &lw.ln_2_weight});
    wants.push_back({h + "ln_2.bias", {C}, &lw.ln_2_bias});
    wants.push_back({h + "mlp.c_fc.weight", {C, 4 * C}, &lw.mlp_fc_weight});
    wants.push_back({h + "mlp.c_fc.bias", {4 * C}, &lw.mlp_fc_bias});
    wants.push_back({h + "mlp.c_proj.weight", {4 * C, C}, &lw.mlp_proj_weight});
    wants.push_back({h + "mlp.c_proj.bias", {C}, &lw.mlp_proj_bias});
  }
  std::map<std::string_view, const Want*> wanted;
  for (const Want& want : wants) wanted.emplace(want.name, &want);

  // Unexpected tensors first: a config / file mismatch usually shows here.
  const TensorInfo* lm_head = nullptr;
  for (const auto& [key, t] : by_name) {
    if (wanted.count(key)) continue;
    if (key == "lm_head.weight") {
      lm_head = t;
      continue;
    }
    std::string_view rest;
    const long layer = layer_of(key, &rest);
    if (layer >= 0 && layer < L && (rest == "attn.bias" || rest == "attn.masked_bias")) continue;
    std::string hint;
    if (layer >= L) hint = " (config.json has n_layer " + std::to_string(L) + ")";
    fail(file, "unexpected tensor " + printable(t->name) + hint);
  }

  std::string dtype;
  for (const Want& want : wants) {
    auto it = by_name.find(want.name);
    if (it == by_name.end()) fail(file, "missing tensor " + display(want.name));
    const TensorInfo& t = *it->second;
    if (t.shape != want.shape) {
      fail(file, "tensor " + printable(t.name) + ": shape " + t.shape_string() +
                     " does not match config.json (expected " + shape_string(want.shape) + ")");
    }
    if (t.dtype == DType::Unsupported) {
      fail(file, "tensor " + printable(t.name) + ": unsupported dtype " +
                     printable(t.dtype_string, 20) + " (supported: F32, F16, BF16)");
    }
    if (dtype.empty())
      dtype = dtype_name(t.dtype);
    else if (dtype != dtype_name(t.dtype))
      dtype = "mixed";
  }

  if (lm_head != nullptr) {
    const TensorInfo& wte = *by_name.find("wte.weight")->second;
    const std::vector<int64_t> want = {V, C};
    if (lm_head->shape != want) {
      fail(file, "tensor " + printable(lm_head->name) + ": shape " + lm_head->shape_string() +
                     " does not match config.json (expected " + shape_string(want) + ")");
    }
    if (lm_head->dtype == DType::Unsupported || !same_values(*lm_head, wte)) {
      fail(file, "tensor " + printable(lm_head->name) +
                     ": untied lm_head not supported (it differs from wte.weight)");
    }
  }

  // The tensors to copy or convert (all of them, or those not usable in
  // place) go into one buffer of huge pages, each at a 64-byte boundary.
  constexpr size_t kAlignFloats = 16;
  std::vector<size_t> offsets(wants.size(), SIZE_MAX);
  size_t total = 0;
  for (size_t i = 0; i < wants.size(); ++i) {
    const TensorInfo& t = *by_name.find(wants[i].name)->second;
    if (!copy && SafetensorsFile::f32_in_place(t) != nullptr) continue;
    offsets[i] = total;
    total += (static_cast<size_t>(t.numel()) + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  }
  auto storage = std::make_shared<WeightStorage>();
  if (total > 0)
    storage->buffer =
        std::make_unique<AnonymousMemory>(total, "weights", AnonymousMemory::Pages::kHuge);
  std::unique_ptr<FileReader> reader;
  if (copy) reader = std::make_unique<FileReader>(st_path);
  for (size_t i = 0; i < wants.size(); ++i) {
    const TensorInfo& t = *by_name.find(wants[i].name)->second;
    const size_t count = static_cast<size_t>(t.numel());
    if (offsets[i] == SIZE_MAX) {
      *wants[i].dst = SafetensorsFile::f32_in_place(t);
      check_finite(file, t.name, *wants[i].dst, count);
      continue;
    }
    float* dst = storage->buffer->data() + offsets[i];
    *wants[i].dst = dst;
    if (copy && t.dtype == DType::F32) {
      // Read in pieces that stay in the cache while they are scanned for
      // NaN and infinity: the check then costs almost nothing.
      // (One that holds one: the rest is read, and the whole tensor counted.)
      constexpr size_t kPiece = size_t{64} << 10;  // floats: 256 KiB
      const uint64_t begin = st.header().data_offset + t.begin;
      for (size_t at = 0; at < count; at += kPiece) {
        const size_t n = std::min(kPiece, count - at);
        reader->read(begin + at * sizeof(float), dst + at, n * sizeof(float));
        if (first_non_finite(dst + at, n) == n) continue;
        reader->read(begin + (at + n) * sizeof(float), dst + at + n,
                     (count - at - n) * sizeof(float));
        check_finite(file, t.name, dst, count);
      }
      continue;
    }
    SafetensorsFile::to_f32(t, dst);
    check_finite(file, t.name, dst, count);
    // Converted through the map: its pages leave as they are read, so the
    // weights are never resident twice (peak memory stays about one copy).
    if (copy) st.file().release(t.data, static_cast<size_t>(t.nbytes()));
  }
  if (!copy) storage->file = std::move(st_owner);  // else unmapped on return

  w.source = dir_name;
  w.storage_dtype = dtype;
  w.storage = std::move(storage);
  return w;
}

ModelWeights load_model(const fs::path& path, int tokenizer_vocab_size) {
  const std::string name = path.string();
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  // A symlink loop or a denied directory says so, not "no such file".
  if (ec && ec != std::errc::no_such_file_or_directory) fail(name, ec.message());
  if (ec || !fs::exists(status)) fail(name, "no such file or directory");
  if (fs::is_directory(status)) return load_model_dir(path, tokenizer_vocab_size);
  if (!fs::is_regular_file(status)) fail(name, "not a regular file or directory");

  const std::string filename = path.filename().string();
  if (is_llmc_checkpoint(path)) {
    ModelWeights w = load_llmc_checkpoint(path);
    if (tokenizer_vocab_size >= 0 && tokenizer_vocab_size != w.config.vocab_size) {
      fail(name, "vocab_size " + std::to_string(w.config.vocab_size) +
                     " does not match the tokenizer (" + std::to_string(tokenizer_vocab_size) +
                     " tokens)");
    }
    return w;
  }
  if (filename == "model.safetensors" || filename == "config.json") {
    return load_model_dir(path.has_parent_path() ? path.parent_path() : fs::path("."),
                          tokenizer_vocab_size);
  }
  if (filename == "pytorch_model.bin") {
    fail(name,
         "PyTorch pickle checkpoints are not supported; convert it to model.safetensors "
         "(e.g. model.save_pretrained(dir, safe_serialization=True))");
  }
  if (path.extension() == ".bin") return load_llmc_checkpoint(path);  // reports the bad magic
  fail(name,
       "not a model: expected a Hugging Face GPT-2 directory (config.json + "
       "model.safetensors) or an llm.c gpt2_*.bin checkpoint");
}

}  // namespace ts
