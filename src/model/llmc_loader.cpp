#include "model/llmc_loader.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "model/config_json.h"  // size limits
#include "model/half_float.h"
#include "model/mapped_file.h"
#include "model/model_loader.h"  // check_weights_finite
#include "util/anonymous_memory.h"
#include "util/error.h"

namespace ts {

namespace fs = std::filesystem;

namespace {

constexpr size_t kHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw Error(file + ": " + what);
}

int32_t read_le32(const uint8_t* p) {
  const uint32_t u =
      uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
  int32_t v;
  std::memcpy(&v, &u, 4);
  return v;
}

// Reads consecutive parameter tensors from the file, converting to fp32.
class ParamReader {
 public:
  ParamReader(const uint8_t* p, bool bf16) : p_(p), elem_(bf16 ? 2 : 4), bf16_(bf16) {}

  // Next n values into dst (dst may be null to skip them).
  void read(size_t n, float* dst) {
    if (dst != nullptr) {
      if (bf16_)
        convert_bf16_to_f32(p_, dst, n);
      else
        std::memcpy(dst, p_, n * sizeof(float));
    }
    p_ += n * elem_;
  }

  // Next [rows, cols] matrix, stored transposed into dst as [cols, rows].
  void read_transposed(size_t rows, size_t cols, float* dst, std::vector<float>& scratch) {
    scratch.resize(rows * cols);
    read(rows * cols, scratch.data());
    constexpr size_t kB = 32;
    for (size_t r0 = 0; r0 < rows; r0 += kB) {
      for (size_t c0 = 0; c0 < cols; c0 += kB) {
        const size_t r1 = std::min(rows, r0 + kB), c1 = std::min(cols, c0 + kB);
        for (size_t r = r0; r < r1; ++r)
          for (size_t c = c0; c < c1; ++c) dst[c * rows + r] = scratch[r * cols + c];
      }
    }
  }

 private:
  const uint8_t* p_;
  size_t elem_;
  bool bf16_;
};

}  // namespace

bool is_llmc_checkpoint(const fs::path& file) {
  // Only a regular file is opened: a FIFO would block open() forever.
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return false;
  std::ifstream in(file, std::ios::binary);
  uint8_t b[4] = {};
  if (!in.read(reinterpret_cast<char*>(b), 4)) return false;
  return read_le32(b) == kLlmcMagic;
}

ModelWeights load_llmc_checkpoint(const fs::path& path) {
  // Populated: the copy below then takes no page fault per 4 KB (on a VM where
  // a fault costs ~13 us, unpopulated reads made a 124M load 0.5-1.4 s slower).
  const MappedFile mf(path, MappedFile::Populate::kYes);
  return load_llmc_image(mf.data(), mf.size(), path.string());
}

ModelWeights load_llmc_image(const uint8_t* data, size_t size, const std::string& file) {
  if (size < kHeaderBytes) {
    fail(file, "file is " + std::to_string(size) + " bytes, too short for the " +
                   std::to_string(kHeaderBytes) + "-byte llm.c header (truncated or not llm.c)");
  }
  int32_t h[8];
  for (int i = 0; i < 8; ++i) h[i] = read_le32(data + 4 * i);

  if (h[0] != kLlmcMagic) {
    fail(file, "bad magic " + std::to_string(h[0]) + " in header[0] (expected " +
                   std::to_string(kLlmcMagic) + "; not an llm.c checkpoint)");
  }
  if (h[1] != kLlmcVersionF32 && h[1] != kLlmcVersionBF16) {
    fail(file, "header[1] version " + std::to_string(h[1]) + " not supported (3 = fp32, 5 = bf16)");
  }
  struct Field {
    int index;
    const char* name;
    int max_value;
  };
  const Field fields[] = {{2, "max_seq_len", kMaxContext}, {3, "vocab_size", kMaxVocab},
                          {4, "num_layers", kMaxLayers},   {5, "num_heads", kMaxEmbd},
                          {6, "channels", kMaxEmbd},       {7, "padded_vocab_size", kMaxVocab}};
  for (const Field& f : fields) {
    const int32_t v = h[f.index];
    const std::string label = "header[" + std::to_string(f.index) + "] " + f.name + " ";
    if (v <= 0) fail(file, label + std::to_string(v) + " must be positive");
    if (v > f.max_value) {
      fail(file, label + std::to_string(v) + " is larger than the supported maximum " +
                     std::to_string(f.max_value));
    }
  }
  const bool bf16 = h[1] == kLlmcVersionBF16;
  const uint64_t T = uint64_t(h[2]), V = uint64_t(h[3]), L = uint64_t(h[4]), NH = uint64_t(h[5]),
                 C = uint64_t(h[6]), Vp = uint64_t(h[7]);
  if (C % NH != 0) {
    fail(file, "header[6] channels " + std::to_string(C) +
                   " is not divisible by header[5] num_heads " + std::to_string(NH));
  }
  if (Vp < V) {
    fail(file, "header[7] padded_vocab_size " + std::to_string(Vp) +
                   " is smaller than header[3] vocab_size " + std::to_string(V));
  }

  // Bounded by the limits above: every product fits comfortably in uint64.
  const uint64_t per_layer =
      2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C);
  const uint64_t stored = Vp * C + T * C + L * per_layer + 2 * C;
  const uint64_t elem = bf16 ? 2 : 4;
  const uint64_t expected = kHeaderBytes + stored * elem;
  if (size != expected) {
    fail(file, "file is " + std::to_string(size) + " bytes but its header (version " +
                   std::to_string(h[1]) + ", " + std::to_string(stored) + " parameters) implies " +
                   std::to_string(expected) + " bytes" +
                   (size < expected ? " (truncated)" : " (trailing data)"));
  }

  ModelConfig config;
  config.vocab_size = int(V);
  config.n_ctx = int(T);
  config.n_embd = int(C);
  config.n_head = int(NH);
  config.n_layer = int(L);
  config.layer_norm_epsilon = 1e-5f;

  const uint64_t used = uint64_t(config.parameter_count());
  auto buffer = std::make_shared<AnonymousMemory>(static_cast<size_t>(used), "weights",
                                                  AnonymousMemory::Pages::kHuge);
  float* out = buffer->data();
  auto take = [&out](uint64_t n) {
    float* p = out;
    out += n;
    return p;
  };

  ModelWeights w;
  w.config = config;
  w.layers.resize(L);
  ParamReader in(data + kHeaderBytes, bf16);
  std::vector<float> scratch;

  float* wte = take(V * C);
  in.read(V * C, wte);
  in.read((Vp - V) * C, nullptr);  // padding rows
  w.wte = wte;
  float* wpe = take(T * C);
  in.read(T * C, wpe);
  w.wpe = wpe;

  // Per-layer tensors are stored parameter-major: all layers' ln1w, then all ln1b, ...
  auto vectors = [&](uint64_t n, const float* LayerWeights::*field) {
    for (uint64_t l = 0; l < L; ++l) {
      float* p = take(n);
      in.read(n, p);
      w.layers[l].*field = p;
    }
  };
  // An [out, in] matrix per layer, stored as [in, out].
  auto matrices = [&](uint64_t out_dim, uint64_t in_dim, const float* LayerWeights::*field) {
    for (uint64_t l = 0; l < L; ++l) {
      float* p = take(out_dim * in_dim);
      in.read_transposed(out_dim, in_dim, p, scratch);
      w.layers[l].*field = p;
    }
  };
  vectors(C, &LayerWeights::ln_1_weight);
  vectors(C, &LayerWeights::ln_1_bias);
  matrices(3 * C, C, &LayerWeights::attn_qkv_weight);
  vectors(3 * C, &LayerWeights::attn_qkv_bias);
  matrices(C, C, &LayerWeights::attn_proj_weight);
  vectors(C, &LayerWeights::attn_proj_bias);
  vectors(C, &LayerWeights::ln_2_weight);
  vectors(C, &LayerWeights::ln_2_bias);
  matrices(4 * C, C, &LayerWeights::mlp_fc_weight);
  vectors(4 * C, &LayerWeights::mlp_fc_bias);
  matrices(C, 4 * C, &LayerWeights::mlp_proj_weight);
  vectors(C, &LayerWeights::mlp_proj_bias);
  float* lnfw = take(C);
  in.read(C, lnfw);
  w.ln_f_weight = lnfw;
  float* lnfb = take(C);
  in.read(C, lnfb);
  w.ln_f_bias = lnfb;

  check_weights_finite(w, file);
  w.source = file;
  w.storage_dtype = bf16 ? "BF16" : "F32";
  w.storage = std::move(buffer);
  return w;
}

}  // namespace ts
