#pragma once
// Test helpers: a random small GPT-2 held in memory, written to disk as a
// Hugging Face directory (config.json + model.safetensors) or as an llm.c
// gpt2_*.bin, with knobs to produce every kind of malformed file the loaders
// must refuse. Shared by the loader tests and the forward-pass tests.
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"  // ts::DType
#include "model/weights.h"

namespace ts::test {

// A GPT-2 in HF layout: tensors keyed by their names without the
// "transformer." prefix ("wte.weight", "h.0.attn.c_attn.weight", ...), linear
// weights [in, out] (Conv1D), wte [vocab, C], row-major fp32.
struct RandomGpt2 {
  ModelConfig config;
  std::map<std::string, std::vector<float>> tensors;

  const std::vector<float>& at(const std::string& name) const { return tensors.at(name); }
};

// A tiny config good for fast tests: vocab 61, n_ctx 16, C 24, 4 heads, 2 layers.
ModelConfig tiny_config();

// The names and shapes of every tensor the forward pass uses, in HF order.
std::vector<std::pair<std::string, std::vector<int64_t>>> gpt2_tensor_shapes(
    const ModelConfig& config);

// Deterministic random weights (same seed, same numbers on every platform):
// matrices ~ N(0, 0.02), layer-norm weights ~ 1 + N(0, 0.1), biases ~ N(0, 0.02).
RandomGpt2 make_random_gpt2(const ModelConfig& config, uint32_t seed);

// ModelWeights pointing into a shared copy of `model` (no file involved).
ModelWeights as_model_weights(const RandomGpt2& model);

// The pointer `weights` holds for an HF tensor name ("h.1.mlp.c_fc.weight");
// nullptr for a name it does not have.
const float* find_weight(const ModelWeights& weights, const std::string& hf_name);

// Values after a round trip through dtype (what a loader must return for a
// tensor written in that dtype). F32 returns the input unchanged.
std::vector<float> round_trip(const std::vector<float>& values, DType dtype);
// Little-endian bytes of `values` in dtype (F32, F16 or BF16).
std::vector<uint8_t> encode(const std::vector<float>& values, DType dtype);

// config.json contents for `config` (HF GPT2Config field names).
nlohmann::json make_config_json(const ModelConfig& config);

// ---- safetensors, low level ----
struct RawTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", or anything (to test refusals)
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

struct SafetensorsWriteOptions {
  // Edits the header after data_offsets are filled in, before it is written.
  std::function<void(nlohmann::json& header)> edit_header;
  // Replaces the header bytes entirely (after edit_header), e.g. invalid JSON.
  std::optional<std::string> raw_header;
  // Written into the 8-byte length field instead of the true length.
  std::optional<uint64_t> header_length;
  // Pad the header so the data section starts at 2 mod 8 (F32 not 4-aligned).
  bool misalign_data = false;
  size_t truncate_bytes = 0;  // cut this many bytes off the end
  std::map<std::string, std::string> metadata = {{"format", "pt"}};
};

// Tensors are laid out back to back in the order given.
void write_safetensors(const std::filesystem::path& file, const std::vector<RawTensor>& tensors,
                       const SafetensorsWriteOptions& options = {});

// ---- Hugging Face directory ----
struct HfWriteOptions {
  DType dtype = DType::F32;
  bool transformer_prefix = false;  // names "transformer.h.0...." (lm_head.weight never)
  bool tied_lm_head = false;        // also write lm_head.weight, a copy of wte
  bool attn_bias_buffers = false;   // also write h.N.attn.bias / h.N.attn.masked_bias
  bool write_config = true;
  std::vector<std::string> drop;                        // canonical names left out
  std::map<std::string, std::vector<int64_t>> reshape;  // written with this shape (data resized)
  std::map<std::string, std::vector<int64_t>> extra;    // additional F32 tensors (zeros)
  std::map<std::string, std::vector<float>> replace;    // written with these values instead
  std::function<void(nlohmann::json& config)> edit_config;
  SafetensorsWriteOptions safetensors;  // header edits, corrupt length, truncation, alignment
};

// Writes dir/config.json and dir/model.safetensors (dir is created).
void write_hf_dir(const RandomGpt2& model, const std::filesystem::path& dir,
                  const HfWriteOptions& options = {});

// ---- llm.c ----
struct LlmcWriteOptions {
  int version = 3;         // 3 = fp32, 5 = bf16
  int padded_vocab = -1;   // -1: vocab rounded up to a multiple of 128 (as llm.c does)
  float pad_value = 0.5f;  // value of the padding rows of wte (llm.c writes 0)
  std::function<void(std::array<int32_t, 256>& header)> edit_header;
  size_t truncate_bytes = 0;
  size_t extra_bytes = 0;  // zero bytes appended
};

void write_llmc_bin(const RandomGpt2& model, const std::filesystem::path& file,
                    const LlmcWriteOptions& options = {});

// Writes bytes to a file (helper for hand-made corrupt files).
void write_file(const std::filesystem::path& file, const std::vector<uint8_t>& bytes);
void write_file(const std::filesystem::path& file, const std::string& text);
std::vector<uint8_t> read_file(const std::filesystem::path& file);

// A fresh directory under the system temp dir, removed with its contents.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "tokenscope-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace ts::test
