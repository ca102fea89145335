#pragma once
// Writes a randomly initialised GPT-2 in the HF layout (config.json +
// model.safetensors, F32, no tokenizer): something of a real model's shape
// to benchmark on where real weights cannot be downloaded.
#include <cstdint>
#include <filesystem>

#include "model/config.h"

namespace ts::bench {

ModelConfig gpt2_124m_config();
// Throws ts::Error when the directory cannot be written.
void write_random_checkpoint(const ModelConfig& config, const std::filesystem::path& dir,
                             uint64_t seed);

}  // namespace ts::bench
