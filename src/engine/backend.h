#pragma once
// The seam between the engine and the hardware. One forward function serves
// both phases: prefill is one entry with n new tokens; decode is k entries
// with one new token each. The KV cache bookkeeping (which slot each token
// goes to) is decided by the engine before a backend runs; a backend owns
// only the K/V pools and the arithmetic.
#include <memory>
#include <string>
#include <vector>

#include "engine/kv_cache.h"

namespace ts {

struct BatchEntry {
  SeqId seq = -1;
  std::vector<int> tokens;       // the new tokens of this sequence
  int start_pos = 0;             // position of tokens[0] (= cached tokens before)
  std::vector<int> slots;        // physical KV slot for each new token
  std::vector<int> block_table;  // covers start_pos + tokens.size() tokens
  int context() const { return start_pos + static_cast<int>(tokens.size()); }
};

struct ForwardOptions {
  bool record_attention = false;
  std::vector<bool> attention_layers;  // empty = every layer (when recording)
  bool all_logits = false;             // logits for every new token, else the last
  bool record_residuals = false;       // residual stream of the last token (logit lens)
  // The last layer's output after ln_f for every new token (contrastive
  // search compares them); off by default so other steps copy nothing.
  bool record_hidden = false;
  bool wants_attention(int layer) const {
    return record_attention &&
           (attention_layers.empty() ||
            (layer < static_cast<int>(attention_layers.size()) && attention_layers[layer]));
  }
};

struct EntryOutput {
  int logit_rows = 0;         // 1, or tokens.size() with all_logits
  std::vector<float> logits;  // [logit_rows][vocab]
  // attention[layer] = [head][row][context] (row r sees keys 0..start_pos+r;
  // the masked part is 0). Empty for layers not recorded.
  std::vector<std::vector<float>> attention;
  // [n_layer + 1][C]: embedding, then after each block (before ln_f).
  std::vector<float> residuals;
  // [rows][C]: ln_f(x) of every new token, with record_hidden (else empty).
  std::vector<float> hidden;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;         // "cpu", "cuda"
  virtual std::string device_name() const = 0;  // e.g. "AMD EPYC (2 threads)"
  // Allocates the K/V pools for this shape (drops previous contents).
  virtual void init_cache(const KvCacheShape& shape) = 0;
  virtual void copy_blocks(const std::vector<BlockCopy>& copies) = 0;
  virtual void forward(const std::vector<BatchEntry>& batch, const ForwardOptions& options,
                       std::vector<EntryOutput>& outputs) = 0;
};

}  // namespace ts
