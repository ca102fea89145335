#pragma once
// Loading GPT-2 weights into ts::ModelWeights.
//
// Hugging Face directory: config.json + model.safetensors (F32 / F16 / BF16).
// Tensor names with or without the "transformer." prefix; Conv1D weights are
// already [in, out]; h.N.attn.bias / h.N.attn.masked_bias buffers are ignored;
// lm_head.weight, when present, must be a copy of wte (tied) and is ignored.
// Every tensor is copied (F32) or converted (F16 / BF16) once into one owned
// fp32 buffer of huge pages (util/anonymous_memory.h) and the file is not mapped
// after loading returns; but when the machine's available memory is less
// than twice the weights, aligned F32 tensors are read in place from the
// populated file map instead (pages the kernel can drop and read again under
// memory pressure, where an anonymous copy could only be swapped or killed).
// ModelWeights::storage_dtype is the dtype on disk ("F32", "F16", "BF16"; "mixed"
// if the tensors differ). Every tensor and config value is validated; failures
// throw ts::Error with one line naming the file and the tensor or field.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "model/weights.h"

namespace ts {

// Loads an HF GPT-2 directory, or a Llama-family one (config.json's model_type
// llama / qwen2: model/llama_loader.h, which also reads sharded checkpoints;
// `placement` applies to GPT-2 only, the Llama family is always copied). When
// tokenizer_vocab_size >= 0 it must equal
// config.json's vocab_size (the error names config.json and the tokenizer
// file). pytorch_model.bin alone is refused with advice to convert it.
enum class WeightPlacement {
  kAuto,     // copy when available memory >= 2 x the weights, else in place
  kCopy,     // always into the owned buffer
  kInPlace,  // aligned F32 from the file map; the rest converted
};

ModelWeights load_model_dir(const std::filesystem::path& dir, int tokenizer_vocab_size = -1,
                            WeightPlacement placement = WeightPlacement::kAuto);

// Whether load_model_dir copies the weights into its own buffer: kAuto does
// when available_bytes (MemAvailable; < 0 when unknown) is unknown or at
// least twice weight_bytes.
bool copies_weights(WeightPlacement placement, int64_t available_bytes, int64_t weight_bytes);

// Loads whatever `path` is: a directory -> load_model_dir; a file starting
// with llm.c's magic (gpt2_*.bin) -> load_llmc_checkpoint; a model.safetensors
// or config.json file -> its directory. tokenizer_vocab_size as above.
ModelWeights load_model(const std::filesystem::path& path, int tokenizer_vocab_size = -1);

// Stores the matmul weights (wte, an untied lm_head, each layer's qkv, attn
// proj, MLP fc and proj) in `format`, rounded to nearest even, in one new
// owned buffer beside copies of the fp32 tensors (biases, norms, wpe; those a
// Llama-family model lacks stay null); the old storage is
// released. fp32 weights asked for fp32 come back as they are. Throws
// ts::Error in one line naming the tensor when a finite value overflows f16
// (beyond 65504), and for weights already in a 16-bit format.
ModelWeights convert_weights(ModelWeights weights, WeightFormat format);

// Both loaders refuse weights that hold a NaN or an infinity (every logit
// would be NaN): this throws ts::Error with one line naming `file`, the
// first such tensor (its HF name after `name_prefix`, e.g. "transformer."),
// what it holds and where. load_model_dir checks each tensor as it is copied
// (F32 in 256 KiB pieces, scanned while in the cache) or converted;
// load_llmc_image calls this after its copy (one pass at memory speed).
void check_weights_finite(const ModelWeights& weights, const std::string& file,
                          std::string_view name_prefix = {});

}  // namespace ts
