#pragma once
// Loader for llm.c checkpoints (gpt2_124M.bin, gpt2_124M_bf16.bin, ...).
//
// Layout: a header of 256 int32 (little-endian):
//   [0] magic 20240326  [1] version: 3 = fp32, 5 = bf16  [2] max_seq_len
//   [3] vocab_size      [4] num_layers  [5] num_heads  [6] channels
//   [7] padded_vocab_size (>= vocab_size)
// then the parameters, packed in this order (Vp = padded vocab, C = channels,
// L = layers, T = max_seq_len):
//   wte [Vp, C], wpe [T, C], ln1w [L, C], ln1b [L, C], qkvw [L, 3C, C],
//   qkvb [L, 3C], attprojw [L, C, C], attprojb [L, C], ln2w [L, C],
//   ln2b [L, C], fcw [L, 4C, C], fcb [L, 4C], fcprojw [L, C, 4C],
//   fcprojb [L, C], lnfw [C], lnfb [C].
// Matmul weights are [out, in] (PyTorch Linear); they are transposed into the
// [in, out] layout of ts::ModelWeights. wte keeps its first vocab_size rows.
// The file length must match the header exactly.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "model/weights.h"

namespace ts {

inline constexpr int32_t kLlmcMagic = 20240326;
inline constexpr int32_t kLlmcVersionF32 = 3;
inline constexpr int32_t kLlmcVersionBF16 = 5;
inline constexpr int kLlmcHeaderInts = 256;

// True if the file exists and starts with kLlmcMagic (no other check).
bool is_llmc_checkpoint(const std::filesystem::path& file);

ModelWeights load_llmc_checkpoint(const std::filesystem::path& file);

// The same from the file's bytes (what load_llmc_checkpoint maps); `name`
// is used in error messages. The weights are copied: data may go away.
ModelWeights load_llmc_image(const uint8_t* data, size_t size, const std::string& name);

}  // namespace ts
