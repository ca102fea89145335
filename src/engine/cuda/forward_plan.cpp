#include "engine/cuda/forward_plan.h"

#include <algorithm>
#include <climits>
#include <string>

#include "util/error.h"

namespace ts::cuda_detail {
namespace {

[[noreturn]] void fail(size_t entry, const std::string& what) {
  throw Error("cuda forward: entry " + std::to_string(entry) + ": " + what);
}

}  // namespace

size_t metadata_capacity(const ForwardPlan& plan, int block_size, int n_ctx) {
  const size_t blocks_per_entry = static_cast<size_t>((n_ctx + block_size - 1) / block_size);
  const size_t bound = static_cast<size_t>(plan.at.block_tables) +
                       static_cast<size_t>(plan.entries) * blocks_per_entry;
  return std::max(bound, plan.packed.size());
}

int context_bucket(int context, int n_ctx) {
  int b = 64;
  while (b < context) b *= 2;
  return std::max(context, std::min(b, n_ctx));
}

ForwardPlan make_forward_plan(const std::vector<BatchEntry>& batch, const PlanOptions& o) {
  if (batch.empty()) throw Error("cuda forward: empty batch");
  if (o.block_size <= 0 || o.n_head <= 0) throw Error("cuda forward: bad cache shape");
  ForwardPlan p;
  p.entries = static_cast<int>(batch.size());
  p.row_begin.assign(p.entries + 1, 0);
  p.logit_begin.assign(p.entries + 1, 0);
  long long total_blocks = 0;
  int largest = 0;
  for (size_t e = 0; e < batch.size(); ++e) {
    const BatchEntry& b = batch[e];
    const int n = static_cast<int>(b.tokens.size());
    if (n == 0) fail(e, "no new tokens");
    if (b.start_pos < 0) fail(e, "negative start position");
    try {
      check_pass_layout(b, o.n_ctx > 0 ? o.n_ctx : INT_MAX);
    } catch (const Error& err) {
      fail(e, err.what());
    }
    if (static_cast<int>(b.slots.size()) != n) fail(e, "one KV slot per new token is required");
    const long long ctx = static_cast<long long>(b.start_pos) + n;
    if (o.n_ctx > 0 && ctx > o.n_ctx)
      fail(e, "context " + std::to_string(ctx) + " exceeds the model's " + std::to_string(o.n_ctx));
    if (static_cast<long long>(b.block_table.size()) * o.block_size < ctx)
      fail(e, "block table covers " + std::to_string(b.block_table.size() * o.block_size) +
                  " tokens, the context is " + std::to_string(ctx));
    const long long blocks = o.pool_slots / o.block_size;
    const long long needed = (ctx + o.block_size - 1) / o.block_size;
    for (long long i = 0; i < needed; ++i)
      if (b.block_table[i] < 0 || (o.pool_slots > 0 && b.block_table[i] >= blocks))
        fail(e, "block " + std::to_string(b.block_table[i]) + " outside the KV pool");
    for (int i = 0; i < n; ++i) {
      if (o.pool_slots > 0 && (b.slots[i] < 0 || b.slots[i] >= o.pool_slots))
        fail(e, "KV slot " + std::to_string(b.slots[i]) + " outside the pool of " +
                    std::to_string(o.pool_slots));
      // The slot must be where the block table puts this position, or the
      // attention would read a key other than the one written.
      const int pos = b.start_pos + i;
      const long long expect =
          static_cast<long long>(b.block_table[pos / o.block_size]) * o.block_size +
          pos % o.block_size;
      if (b.slots[i] != expect)
        fail(e, "slot " + std::to_string(b.slots[i]) + " of position " + std::to_string(pos) +
                    " disagrees with the block table (" + std::to_string(expect) + ")");
      if (b.tokens[i] < 0 || (o.vocab_size > 0 && b.tokens[i] >= o.vocab_size))
        fail(e, "token id " + std::to_string(b.tokens[i]) + " outside the vocabulary");
    }
    p.row_begin[e + 1] = p.row_begin[e] + n;
    p.logit_begin[e + 1] = p.logit_begin[e] + (o.all_logits ? n : 1);
    p.context.push_back(static_cast<int>(ctx));
    largest = std::max(largest, static_cast<int>(ctx));
    total_blocks += needed;
  }
  p.rows = p.row_begin.back();
  p.logit_rows = p.logit_begin.back();
  p.max_context = o.max_context > 0 ? o.max_context : largest;
  if (p.max_context < largest) throw Error("cuda forward: max_context below a context");
  if (o.probs_stride > 0 && o.probs_stride < largest)
    throw Error("cuda forward: probability stride below a context");
  p.tile_size = o.tile_size;

  // Which rows go to which attention kernel.
  std::vector<int> row_list, tile_row0, tile_rows;
  for (int e = 0; e < p.entries; ++e) {
    const int n = p.row_begin[e + 1] - p.row_begin[e];
    if (o.tile_size > 0 && n >= o.tile_min_rows && !batch[e].masked()) {
      for (int r = 0; r < n; r += o.tile_size) {
        tile_row0.push_back(p.row_begin[e] + r);
        tile_rows.push_back(std::min(o.tile_size, n - r));
      }
    } else {
      for (int r = p.row_begin[e]; r < p.row_begin[e + 1]; ++r) row_list.push_back(r);
    }
  }
  p.row_list_size = static_cast<int>(row_list.size());
  p.tiles = static_cast<int>(tile_row0.size());

  // Probability regions: [head][row][stride] per entry, entry after entry.
  long long probs = 0;
  for (int e = 0; e < p.entries; ++e) {
    const int stride = o.probs_stride > 0 ? o.probs_stride : p.context[e];
    if (probs > INT_MAX) throw Error("cuda forward: attention probabilities too large to index");
    p.probs_offset.push_back(static_cast<int>(probs));
    p.probs_stride.push_back(stride);
    probs += static_cast<long long>(o.n_head) * (p.row_begin[e + 1] - p.row_begin[e]) * stride;
  }
  if (probs > INT_MAX) throw Error("cuda forward: attention probabilities too large to index");
  p.probs_per_layer = probs;

  // Pack.
  MetaOffsets& at = p.at;
  int size = 0;
  auto reserve = [&](int& field, long long count) {
    field = size;
    size += static_cast<int>(count);
  };
  reserve(at.tokens, p.rows);
  reserve(at.positions, p.rows);
  reserve(at.slots, p.rows);
  reserve(at.row_entry, p.rows);
  reserve(at.row_local, p.rows);
  reserve(at.row_key, p.rows);
  reserve(at.row_mask, p.rows);
  reserve(at.entry_context, p.entries);
  reserve(at.entry_rows, p.entries);
  reserve(at.entry_bt_offset, p.entries);
  reserve(at.entry_probs_offset, p.entries);
  reserve(at.entry_probs_stride, p.entries);
  reserve(at.logit_rows, p.logit_rows);
  reserve(at.last_rows, p.entries);
  reserve(at.row_list, p.row_list_size);
  reserve(at.tile_row0, p.tiles);
  reserve(at.tile_rows, p.tiles);
  long long mask_ints = 0;
  for (const BatchEntry& b : batch) mask_ints += static_cast<long long>(b.mask.size());
  if (mask_ints > INT_MAX / 2) throw Error("cuda forward: pass masks too large");
  reserve(at.masks, mask_ints);
  reserve(at.block_tables, total_blocks);
  p.packed.assign(size, 0);
  int* m = p.packed.data();
  int bt = 0, lr = 0, mk = 0;
  for (int e = 0; e < p.entries; ++e) {
    const BatchEntry& b = batch[e];
    const int n = static_cast<int>(b.tokens.size());
    for (int i = 0; i < n; ++i) {
      const int r = p.row_begin[e] + i;
      m[at.tokens + r] = b.tokens[i];
      m[at.positions + r] = b.position(i);
      m[at.slots + r] = b.slots[i];
      m[at.row_entry + r] = e;
      m[at.row_local + r] = i;
      m[at.row_key + r] = b.start_pos + i;
      m[at.row_mask + r] = b.masked() ? mk + i * n : -1;
    }
    for (size_t i = 0; i < b.mask.size(); ++i) m[at.masks + mk + static_cast<int>(i)] = b.mask[i];
    mk += static_cast<int>(b.mask.size());
    m[at.entry_context + e] = p.context[e];
    m[at.entry_rows + e] = n;
    m[at.entry_bt_offset + e] = bt;
    m[at.entry_probs_offset + e] = p.probs_offset[e];
    m[at.entry_probs_stride + e] = p.probs_stride[e];
    const int needed = (p.context[e] + o.block_size - 1) / o.block_size;
    for (int i = 0; i < needed; ++i) m[at.block_tables + bt + i] = b.block_table[i];
    bt += needed;
    for (int r = o.all_logits ? p.row_begin[e] : p.row_begin[e + 1] - 1; r < p.row_begin[e + 1];
         ++r)
      m[at.logit_rows + lr++] = r;
    m[at.last_rows + e] = p.row_begin[e + 1] - 1;
  }
  std::copy(row_list.begin(), row_list.end(), m + at.row_list);
  std::copy(tile_row0.begin(), tile_row0.end(), m + at.tile_row0);
  std::copy(tile_rows.begin(), tile_rows.end(), m + at.tile_rows);
  return p;
}

std::vector<PoolCopy> block_copy_ranges(const BlockCopy& copy, const KvCacheShape& shape,
                                        int n_embd) {
  if (copy.src_block < 0 || copy.dst_block < 0 || copy.src_block >= shape.num_blocks ||
      copy.dst_block >= shape.num_blocks || copy.num_slots < 0 || copy.num_slots > shape.block_size)
    throw Error("cuda copy_blocks: block copy outside the KV pool");
  std::vector<PoolCopy> out;
  if (copy.num_slots == 0) return out;
  const size_t c = static_cast<size_t>(n_embd), bs = static_cast<size_t>(shape.block_size);
  const size_t pool = static_cast<size_t>(shape.num_blocks) * bs * c;  // one K or V pool
  out.reserve(static_cast<size_t>(2) * shape.n_layer);
  for (size_t p = 0; p < static_cast<size_t>(2) * shape.n_layer; ++p)
    out.push_back({p * pool + copy.dst_block * bs * c, p * pool + copy.src_block * bs * c,
                   static_cast<size_t>(copy.num_slots) * c});
  return out;
}

std::vector<PoolCopy> slot_move_ranges(const SlotMove& move, const KvCacheShape& shape,
                                       int n_embd) {
  const long long slots = static_cast<long long>(shape.num_blocks) * shape.block_size;
  if (move.src_slot < 0 || move.dst_slot < 0 || move.src_slot >= slots || move.dst_slot >= slots)
    throw Error("cuda move_slots: slot outside the KV pool");
  const size_t c = static_cast<size_t>(n_embd);
  const size_t pool = static_cast<size_t>(slots) * c;  // one K or V pool
  std::vector<PoolCopy> out;
  out.reserve(static_cast<size_t>(2) * shape.n_layer);
  for (size_t p = 0; p < static_cast<size_t>(2) * shape.n_layer; ++p)
    out.push_back({p * pool + move.dst_slot * c, p * pool + move.src_slot * c, c});
  return out;
}

bool staging_should_shrink(size_t capacity_bytes, size_t needed_bytes) {
  constexpr size_t kKeep = size_t(64) << 20;  // below this, keeping it costs little
  return capacity_bytes > kKeep && capacity_bytes > 4 * needed_bytes;
}

}  // namespace ts::cuda_detail
