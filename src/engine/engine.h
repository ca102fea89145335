#pragma once
// The engine: weights + one backend + the paged KV cache bookkeeping.
// forward() is the single entry point for prefill (one request, n tokens)
// and decode (k requests, one token each). It reserves cache slots,
// runs the backend and rolls the cache back if anything fails, so a
// refused step leaves every sequence exactly as it was.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/cost_model.h"
#include "engine/kv_cache.h"
#include "model/weights.h"

namespace ts {

struct ForwardRequest {
  ForwardRequest() = default;
  ForwardRequest(SeqId s, std::vector<int> t) : seq(s), tokens(std::move(t)) {}
  SeqId seq = -1;
  std::vector<int> tokens;
  // A multi-branch pass (BatchEntry::positions / mask): empty = causal.
  std::vector<int> positions;
  std::vector<uint8_t> mask;
};

struct ForwardResult {
  std::vector<EntryOutput> outputs;  // one per request
  std::vector<AppendPlan> plans;     // slots each request wrote, copies made
  std::vector<int> start_pos;        // cached tokens before the step
  double seconds = 0;                // wall time of the backend forward
  StepCost cost;
};

class Engine {
 public:
  // cache_tokens: capacity of the paged KV cache in tokens (rounded up to
  // blocks); kv_format: how the backend stores K and V (--kv). Throws
  // ts::Error in one line when the backend cannot store that format.
  Engine(std::shared_ptr<const ModelWeights> weights, std::unique_ptr<Backend> backend,
         int cache_tokens, int block_size = 16, WeightFormat kv_format = WeightFormat::kF32);

  const ModelConfig& config() const { return weights_->config; }
  const ModelWeights& weights() const { return *weights_; }
  // The weights as shared: another engine on the same loaded tensors (the
  // batch sweep's) keeps them alive without loading the model again.
  const std::shared_ptr<const ModelWeights>& shared_weights() const { return weights_; }
  Backend& backend() { return *backend_; }
  const Backend& backend() const { return *backend_; }
  KvCacheManager& cache() { return cache_; }
  const KvCacheManager& cache() const { return cache_; }

  ForwardResult forward(const std::vector<ForwardRequest>& requests, const ForwardOptions& options);

  // Runs tokens through a temporary sequence released afterwards: the cache-off
  // decode, recomputation of trace data beyond the budget, evaluation.
  ForwardResult forward_scratch(const std::vector<int>& tokens, const ForwardOptions& options);

  // The decode step without a KV cache (the naive loop): the whole context
  // runs through a temporary sequence, and the output is the last token's as
  // a cached step returns it (its logits, residuals, hidden state and
  // attention row [head][1][context]; options.all_logits does not apply); seconds and cost
  // are the whole recomputation's.
  // The session's cache-off steps and the cache on/off comparison use it.
  ForwardResult forward_uncached(const std::vector<int>& context, const ForwardOptions& options);

  // After a multi-branch pass on seq that started at start_pos: keeps the
  // new tokens at indices `kept` (increasing) as the tokens right after
  // start_pos, moving their K/V rows into place, and truncates the rest.
  // kept = {0, 1, ..., k-1} is a plain truncation. Throws ts::Error and
  // changes nothing for indices out of order or beyond the sequence.
  void keep_rows(SeqId seq, int start_pos, const std::vector<int>& kept);

 private:
  std::shared_ptr<const ModelWeights> weights_;
  std::unique_ptr<Backend> backend_;
  KvCacheManager cache_;
};

}  // namespace ts
