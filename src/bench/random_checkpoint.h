#pragma once
// Writes a randomly initialised GPT-2 in the HF layout (config.json +
// model.safetensors, F32, no tokenizer): something of a real model's shape
// to benchmark on where real weights cannot be downloaded.
#include <cstdint>
#include <filesystem>

#include "model/config.h"

namespace ts::bench {

ModelConfig gpt2_124m_config();
// GPT-2 XL's shape: 48 layers, 1600 dims, 25 heads (1.56 G parameters,
// 6.2 GB of fp32 weights).
ModelConfig gpt2_1558m_config();
// GPT-2 medium's shape: 24 layers, 1024 dims, 16 heads (355 M parameters).
ModelConfig gpt2_355m_config();
// Also writes a byte-level tokenizer of config.vocab_size tokens
// (vocab.json + merges.txt: the 256 bytes, filler words, <|endoftext|> last)
// so that the CLI and the window run the checkpoint too.
// Throws ts::Error when the directory cannot be written.
// The residual projections are initialised with 0.02 / sqrt(2 L) (GPT-2's
// scheme), L = init_layers when positive, else config.n_layer: a checkpoint
// written with fewer layers, init_layers = a deeper one's n_layer and the
// same seed holds exactly that deeper model's embeddings and first layers
// (the tensors are drawn in file order from one stream).
void write_random_checkpoint(const ModelConfig& config, const std::filesystem::path& dir,
                             uint64_t seed, int init_layers = 0);

}  // namespace ts::bench
