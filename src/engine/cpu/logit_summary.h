#pragma once
// What a step's logits look like without shipping all of them: the k largest
// with their softmax probabilities, the log-sum-exp and the entropy.
// CPU twin (and reference) of the CUDA kernel kernels/logit_summary.cu.
#include <vector>

namespace ts::cpu {

struct LogitSummary {
  float max_logit = 0;
  float log_sum_exp = 0;  // log(sum(exp(logits)))
  float entropy = 0;      // of softmax(logits), in nats
  std::vector<int> ids;   // k ids, larger logit first, smaller id first on ties
  std::vector<float> logits;
  std::vector<float> probs;  // softmax probability of each id
};

// k in [1, vocab]; a NaN logit counts as -inf. Sums in double.
LogitSummary summarize_logits(const float* logits, int vocab, int k);

}  // namespace ts::cpu
