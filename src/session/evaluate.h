#pragma once
// Mean next-token cross-entropy of a text under the model: the figure the
// model card compares with PyTorch's.
#include <string_view>

#include "engine/engine.h"
#include "model/tokenizer.h"

namespace ts {

struct LossReport {
  long long tokens = 0;       // tokens in the text
  long long predictions = 0;  // positions scored
  int windows = 0;
  double mean_nats = 0;  // mean -log p(next token)
};

// The token stream is cut into consecutive, non-overlapping windows of
// `window` tokens (the last, shorter one included if it has >= 2 tokens);
// inside each window every token but the first is predicted from the ones
// before it.
LossReport evaluate_loss(Engine& engine, const std::vector<int>& tokens, int window);

}  // namespace ts
