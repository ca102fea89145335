#pragma once
// Loading a Llama-family Hugging Face directory (model_type llama / qwen2):
// config.json + model.safetensors, or shards named by
// model.safetensors.index.json's weight_map. Every tensor is converted once
// (F32 / F16 / BF16 -> fp32) into one owned buffer, the nn.Linear weights
// transposed to the [in, out] layout the kernels read and fused as
// weights.h describes. rotary_emb.inv_freq buffers are ignored (RoPE is
// computed from rope_theta); lm_head.weight is ignored when the config ties
// it. Errors throw ts::Error in one line naming the file and the tensor.
#include <filesystem>

#include "model/weights.h"

namespace ts {

ModelWeights load_llama_dir(const std::filesystem::path& dir, const ModelConfig& config);

}  // namespace ts
