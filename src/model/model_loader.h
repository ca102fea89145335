#pragma once
// Loading GPT-2 weights into ts::ModelWeights.
//
// Hugging Face directory: config.json + model.safetensors (F32 / F16 / BF16).
// Tensor names with or without the "transformer." prefix; Conv1D weights are
// already [in, out]; h.N.attn.bias / h.N.attn.masked_bias buffers are ignored;
// lm_head.weight, when present, must be a copy of wte (tied) and is ignored.
// F32 tensors aligned in the file are used in place from the memory map (zero
// copy); F16 / BF16 (and unaligned F32) are converted once into owned fp32.
// ModelWeights::storage_dtype is the dtype on disk ("F32", "F16", "BF16"; "mixed"
// if the tensors differ). Every tensor and config value is validated; failures
// throw ts::Error with one line naming the file and the tensor or field.
#include <filesystem>

#include "model/weights.h"

namespace ts {

// Loads an HF GPT-2 directory. When tokenizer_vocab_size >= 0 it must equal
// config.json's vocab_size (the error names config.json and the tokenizer
// file). pytorch_model.bin alone is refused with advice to convert it.
ModelWeights load_model_dir(const std::filesystem::path& dir, int tokenizer_vocab_size = -1);

// Loads whatever `path` is: a directory -> load_model_dir; a file starting
// with llm.c's magic (gpt2_*.bin) -> load_llmc_checkpoint; a model.safetensors
// or config.json file -> its directory. tokenizer_vocab_size as above.
ModelWeights load_model(const std::filesystem::path& path, int tokenizer_vocab_size = -1);

}  // namespace ts
