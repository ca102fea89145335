#include "session/evaluate.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace ts {

LossReport evaluate_loss(Engine& engine, const std::vector<int>& tokens, int window) {
  const int v = engine.config().vocab_size;
  if (window < 2 || window > engine.config().n_ctx)
    throw Error("evaluation window must be between 2 and the model's context");
  LossReport report;
  report.tokens = static_cast<long long>(tokens.size());
  double total = 0;
  ForwardOptions opts;
  opts.all_logits = true;
  for (size_t begin = 0; begin + 1 < tokens.size(); begin += window) {
    const size_t end = std::min(tokens.size(), begin + window);
    if (end - begin < 2) break;
    const std::vector<int> chunk(tokens.begin() + static_cast<long>(begin),
                                 tokens.begin() + static_cast<long>(end));
    ForwardResult r = engine.forward_scratch(chunk, opts);
    const std::vector<float>& logits = r.outputs[0].logits;
    for (size_t i = 0; i + 1 < chunk.size(); ++i) {
      const float* row = logits.data() + i * v;
      // The same refusal as generation: a loss from NaN or +inf logits means nothing.
      for (int j = 0; j < v; ++j) {
        if (std::isnan(row[j])) throw Error("evaluation: logits contain NaN");
        if (std::isinf(row[j]) && row[j] > 0) throw Error("evaluation: logits contain +inf");
      }
      // log-sum-exp in double, then the target's log-probability
      const float mx = *std::max_element(row, row + v);
      double sum = 0;
      for (int j = 0; j < v; ++j) sum += std::exp(row[j] - mx);  // float exp, double sum
      total += (std::log(sum) + mx) - row[chunk[i + 1]];
      ++report.predictions;
    }
    ++report.windows;
  }
  if (report.predictions == 0) throw Error("evaluation text has fewer than 2 tokens");
  report.mean_nats = total / static_cast<double>(report.predictions);
  if (!std::isfinite(report.mean_nats))
    throw Error("evaluation: the mean loss is not finite (a target token has probability 0)");
  return report;
}

}  // namespace ts
