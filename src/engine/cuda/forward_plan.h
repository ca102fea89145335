#pragma once
// The host side of one CUDA forward pass: checks the batch and lays out the
// metadata the kernels read (tokens, positions, KV slots, block tables, which
// rows go to which attention kernel, where probabilities go) in one int array,
// so a single copy uploads it. No CUDA types: it is tested without a GPU.
//
// The offsets of every array except the block tables (last) depend only on
// the numbers of rows, entries, logit rows, row-kernel rows and tiles, so a
// decode step with the same lanes reuses the same device addresses: what a
// CUDA graph needs to be replayed with new metadata.
#include <cstddef>
#include <vector>

#include "engine/backend.h"

namespace ts::cuda_detail {

struct PlanOptions {
  int block_size = 16;
  int n_head = 0;
  int vocab_size = 0;        // tokens must be below it
  int n_ctx = 0;             // contexts must not exceed it
  long long pool_slots = 0;  // KV slots (and block-table entries * block_size) must be below it
  bool all_logits = false;
  int tile_size = 0;      // rows per tile-kernel block; 0: row kernel only
  int tile_min_rows = 8;  // entries with at least this many new rows use the tile kernel
  int probs_stride = 0;   // 0: each entry's context; else this for every entry
  int max_context = 0;    // 0: the largest context; else this (>= every context)
};

struct MetaOffsets {
  int tokens = 0, positions = 0, slots = 0, row_entry = 0, row_local = 0, row_key = 0, row_mask = 0;
  int entry_context = 0, entry_rows = 0, entry_bt_offset = 0, entry_probs_offset = 0,
      entry_probs_stride = 0;
  int logit_rows = 0, last_rows = 0, row_list = 0, tile_row0 = 0, tile_rows = 0;
  int masks = 0;  // the masked entries' [rows][rows] masks (none: empty)
  int block_tables = 0;
};

struct ForwardPlan {
  int rows = 0;  // new tokens of all entries
  int entries = 0;
  int logit_rows = 0;  // rows that get logits
  int row_list_size = 0;
  int tiles = 0;
  int tile_size = 0;
  int max_context = 0;
  long long probs_per_layer = 0;  // floats of one layer's probabilities, all entries
  std::vector<int> row_begin;     // [entries + 1]
  std::vector<int> logit_begin;   // [entries + 1] first logit row of each entry
  std::vector<int> context;       // [entries]
  std::vector<int> probs_offset;  // [entries] floats into one layer's region
  std::vector<int> probs_stride;  // [entries]
  std::vector<int> packed;        // everything the kernels read
  MetaOffsets at;                 // where each array starts in packed
};

// Throws ts::Error naming the first inconsistency (a slot outside the pool, a
// block table too short for the context, ...): a device kernel must never be
// handed an index it would write out of bounds with.
ForwardPlan make_forward_plan(const std::vector<BatchEntry>& batch, const PlanOptions& options);

// Ints of device metadata that hold any plan with this plan's entries, rows,
// logit rows and tiles at any context up to n_ctx: only the block tables
// (last in `packed`) grow with the context, by one int per block_size tokens
// per entry. Sizing the metadata buffer for this once keeps a long decode
// from reallocating it (and re-capturing every decode graph) every
// block_size tokens.
size_t metadata_capacity(const ForwardPlan& plan, int block_size, int n_ctx);

// The context size a decode graph is captured for: a power of two >= 64 that
// holds `context`, capped at n_ctx.
int context_bucket(int context, int n_ctx);

// One contiguous device-to-device copy, in floats from the pools' start.
struct PoolCopy {
  size_t dst = 0;
  size_t src = 0;
  size_t count = 0;
};

// The copies that move one KV block (copy-on-write) in every layer's K and V
// pool: one plain copy per pool, so no copy has a pitch (a 2D copy with the
// layer pool as its pitch is refused above 2 GiB). The pools are laid out
// [layer][K|V][slot][n_embd]. Throws when the block lies outside the pool.
std::vector<PoolCopy> block_copy_ranges(const BlockCopy& copy, const KvCacheShape& shape,
                                        int n_embd);

// The copies that move one KV row (a slot) in every layer's K and V pool.
// Throws when either slot lies outside the pool.
std::vector<PoolCopy> slot_move_ranges(const SlotMove& move, const KvCacheShape& shape, int n_embd);

// The pinned staging buffer grows to the largest step's results; after a
// step that needed far less it is given back (and reserved again at the new
// size), so one traced 1,024-token prefill does not keep hundreds of MB of
// page-locked host memory for the rest of the session.
bool staging_should_shrink(size_t capacity_bytes, size_t needed_bytes);

}  // namespace ts::cuda_detail
