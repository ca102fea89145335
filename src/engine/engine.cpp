#include "engine/engine.h"

#include <chrono>
#include <string>

#include "util/error.h"

namespace ts {
namespace {

KvCacheShape make_shape(const ModelConfig& cfg, int cache_tokens, int block_size,
                        WeightFormat format) {
  if (cache_tokens <= 0) throw Error("KV cache capacity must be positive");
  KvCacheShape shape;
  shape.n_layer = cfg.n_layer;
  shape.n_head = cfg.kv_heads();  // the heads the cache holds (GQA: fewer than the queries)
  shape.head_dim = cfg.head_dim();
  shape.block_size = block_size;
  shape.num_blocks = (cache_tokens + block_size - 1) / block_size;
  shape.format = format;
  return shape;
}

}  // namespace

void check_pass_layout(const BatchEntry& b, int n_ctx) {
  const size_t n = b.tokens.size();
  if (!b.positions.empty()) {
    if (b.positions.size() != n)
      throw Error("forward: " + std::to_string(b.positions.size()) + " positions for " +
                  std::to_string(n) + " new tokens");
    for (int p : b.positions)
      if (p < 0 || p >= n_ctx)
        throw Error("forward: position " + std::to_string(p) + " outside the model's context (0.." +
                    std::to_string(n_ctx - 1) + ")");
  }
  if (b.mask.empty()) return;
  if (b.mask.size() != n * n)
    throw Error("forward: a pass mask needs " + std::to_string(n) + " x " + std::to_string(n) +
                " entries, got " + std::to_string(b.mask.size()));
  for (size_t i = 0; i < n; ++i) {
    if (!b.mask[i * n + i])
      throw Error("forward: pass mask row " + std::to_string(i) + " does not attend to itself");
    for (size_t j = i + 1; j < n; ++j)
      if (b.mask[i * n + j])
        throw Error("forward: pass mask row " + std::to_string(i) + " attends to a later token (" +
                    std::to_string(j) + ")");
  }
}

Engine::Engine(std::shared_ptr<const ModelWeights> weights, std::unique_ptr<Backend> backend,
               int cache_tokens, int block_size, WeightFormat kv_format)
    : weights_(std::move(weights)),
      backend_(std::move(backend)),
      cache_(make_shape(weights_->config, cache_tokens, block_size, kv_format)) {
  if (!backend_->stores_kv_format(kv_format))
    throw Error(std::string("--kv ") + weight_format_name(kv_format) + ": the " + backend_->name() +
                " backend keeps its KV cache in f32 only; use --device cpu or --kv f32");
  backend_->init_cache(cache_.shape());
}

ForwardResult Engine::forward(const std::vector<ForwardRequest>& requests,
                              const ForwardOptions& options) {
  const ModelConfig& cfg = config();
  if (requests.empty()) throw Error("forward: no sequences to run");
  for (const ForwardRequest& r : requests) {
    if (!cache_.contains(r.seq)) throw Error("forward: unknown sequence " + std::to_string(r.seq));
    if (r.tokens.empty()) throw Error("forward: no new tokens");
    for (int t : r.tokens)
      if (t < 0 || t >= cfg.vocab_size)
        throw Error("token id " + std::to_string(t) + " outside the vocabulary (0.." +
                    std::to_string(cfg.vocab_size - 1) + ")");
    const long long total = static_cast<long long>(cache_.length(r.seq)) + r.tokens.size();
    if (total > cfg.n_ctx)
      throw Error("context full: " + std::to_string(total) +
                  " tokens exceed the model's context of " + std::to_string(cfg.n_ctx));
  }
  // A sequence may appear once per step; two requests on one cache sequence
  // would write the same positions.
  for (size_t i = 0; i < requests.size(); ++i)
    for (size_t j = i + 1; j < requests.size(); ++j)
      if (requests[i].seq == requests[j].seq) throw Error("forward: sequence given twice");
  for (const ForwardRequest& r : requests) {  // before any slot is taken
    BatchEntry probe;
    probe.tokens = r.tokens;
    probe.positions = r.positions;
    probe.mask = r.mask;
    check_pass_layout(probe, cfg.n_ctx);
  }

  ForwardResult result;
  std::vector<BatchEntry> batch(requests.size());
  std::vector<EntryShape> shapes;
  size_t reserved = 0;  // requests whose cache slots are taken: undone if anything fails
  try {
    while (reserved < requests.size()) {
      const ForwardRequest& r = requests[reserved];
      BatchEntry& b = batch[reserved];
      b.seq = r.seq;
      b.tokens = r.tokens;
      b.positions = r.positions;
      b.mask = r.mask;
      b.start_pos = cache_.length(r.seq);
      result.plans.push_back(cache_.append(r.seq, static_cast<int>(r.tokens.size())));
      ++reserved;
      const AppendPlan& plan = result.plans.back();
      backend_->copy_blocks(plan.copies);  // copy-on-write of a shared last block
      b.slots = plan.slots;
      b.block_table = cache_.block_table(r.seq);
      result.start_pos.push_back(b.start_pos);
      shapes.push_back({b.start_pos, static_cast<int>(r.tokens.size()),
                        options.all_logits ? static_cast<int>(r.tokens.size()) : 1});
    }
    const auto t0 = std::chrono::steady_clock::now();
    backend_->forward(batch, options, result.outputs);
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } catch (...) {
    // Undo every reservation of this step, newest first, copied blocks included.
    for (size_t i = reserved; i-- > 0;)
      cache_.undo_append(batch[i].seq, batch[i].start_pos, result.plans[i]);
    throw;
  }
  result.cost = estimate_step_cost(cfg, shapes, weights_->format, cache_.shape().format);
  return result;
}

ForwardResult Engine::forward_scratch(const std::vector<int>& tokens,
                                      const ForwardOptions& options) {
  const SeqId seq = cache_.create();
  try {
    ForwardResult r = forward({ForwardRequest{seq, tokens}}, options);
    cache_.release(seq);
    return r;
  } catch (...) {
    cache_.release(seq);
    throw;
  }
}

ForwardResult Engine::forward_uncached(const std::vector<int>& context,
                                       const ForwardOptions& options) {
  ForwardOptions last_row = options;
  last_row.all_logits = false;
  ForwardResult r = forward_scratch(context, last_row);
  std::vector<float>& hidden = r.outputs[0].hidden;
  if (!hidden.empty())  // the last token's row only, as a cached step returns it
    hidden.erase(hidden.begin(), hidden.end() - config().n_embd);
  // Keep the last row of each recorded attention layer: [head][rows][context] ->
  // [head][1][context].
  const size_t n = context.size();
  for (std::vector<float>& layer : r.outputs[0].attention) {
    if (layer.empty()) continue;
    std::vector<float> row;
    row.reserve(layer.size() / n);
    for (size_t h = 0; h < layer.size() / (n * n); ++h) {
      const auto begin = layer.begin() + static_cast<long>((h * n + n - 1) * n);
      row.insert(row.end(), begin, begin + static_cast<long>(n));
    }
    layer = std::move(row);
  }
  return r;
}

void Engine::keep_rows(SeqId seq, int start_pos, const std::vector<int>& kept) {
  const int length = cache_.length(seq);
  const int fed = length - start_pos;
  if (start_pos < 0 || fed < 0) throw Error("keep_rows: start beyond the sequence");
  for (size_t i = 0; i < kept.size(); ++i) {
    if (kept[i] < 0 || kept[i] >= fed || (i > 0 && kept[i] <= kept[i - 1]))
      throw Error("keep_rows: kept rows must increase and lie inside the pass");
  }
  // Each kept row moves down (kept[i] >= i), in increasing order: a move
  // never overwrites a row a later move still reads.
  const std::vector<int>& table = cache_.block_table(seq);
  const int bs = cache_.shape().block_size;
  const auto slot = [&](int index) { return table[index / bs] * bs + index % bs; };
  std::vector<SlotMove> moves;
  for (size_t i = 0; i < kept.size(); ++i)
    if (kept[i] != static_cast<int>(i))
      moves.push_back({slot(start_pos + kept[i]), slot(start_pos + static_cast<int>(i))});
  backend_->move_slots(moves);
  cache_.truncate(seq, start_pos + static_cast<int>(kept.size()));
}

}  // namespace ts
