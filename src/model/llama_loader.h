#pragma once
// Loading a Llama-family Hugging Face directory (model_type llama / qwen2):
// config.json + model.safetensors, or shards named by
// model.safetensors.index.json's weight_map. Every tensor is converted once
// (F32 / F16 / BF16 -> fp32) into one owned buffer, the nn.Linear weights
// transposed to the [in, out] layout the kernels read and fused as
// weights.h describes. rotary_emb.inv_freq buffers are ignored (RoPE is
// computed from rope_theta); lm_head.weight is ignored when the config ties
// it. Errors throw ts::Error in one line naming the file and the tensor.
#include <cstdint>
#include <filesystem>
#include <string>

#include "model/weights.h"

namespace ts {

//
// Before the buffer is allocated, the fp32 size is checked against the
// machine's available memory (check_llama_memory). Tensors are converted one
// at a time from the file map, each one's mapped pages released once it is
// converted, so the peak is the fp32 buffer plus one tensor's scratch and
// source pages, never two full copies.
ModelWeights load_llama_dir(const std::filesystem::path& dir, const ModelConfig& config);

// Throws ts::Error in one line naming `dir` when `weight_bytes` (the fp32
// copy) is more than `available_bytes` (MemAvailable; < 0 when unknown: no
// check), rather than letting the allocation or the kernel's OOM killer fail.
void check_llama_memory(int64_t weight_bytes, int64_t available_bytes, const std::string& dir);

}  // namespace ts
