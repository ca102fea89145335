#pragma once
// Paged KV cache bookkeeping (vLLM style), shared by every backend.
// This class owns no K/V numbers: it hands out fixed-size blocks, keeps one
// block table per sequence and a reference count per block. Backends own the
// pools (host or device memory) and execute the BlockCopy list an append
// returns (copy-on-write of a shared, partially filled last block).
//
// Physical slot of a token = block_index * block_size + offset_in_block.
#include <cstdint>
#include <vector>

#include "model/weight_format.h"

namespace ts {

using SeqId = int;

struct KvCacheShape {
  int n_layer = 0;
  // The KV heads each layer caches: the model's n_head for GPT-2, its
  // num_key_value_heads under grouped-query attention. A token takes
  // 2 * n_layer * n_head * head_dim values.
  int n_head = 0;
  int head_dim = 0;
  int block_size = 16;  // tokens per block
  int num_blocks = 0;   // capacity, in blocks (all layers share the numbering)
  // How the backend stores each K and V value (--kv): f32, f16 / bf16 at 2
  // bytes a value, or q8: each head's slice of a token's key (and value) row
  // as head_dim / 32 BlockQ8s of 34 bytes (head_dim must be a multiple of 32).
  WeightFormat format = WeightFormat::kF32;

  // Bytes of one slot's K (or V) row in one layer: n_head * head_dim values in
  // `format` (in q8 a whole number of blocks, 34 bytes per 32 values).
  int64_t bytes_per_row() const { return int64_t(stored_bytes(format, size_t(n_head) * head_dim)); }
  // Bytes one block holds in one layer, K and V together, in `format`.
  int64_t bytes_per_block_per_layer() const { return int64_t(2) * block_size * bytes_per_row(); }
};

// Copy every layer's K and V of src_block into dst_block (slots [0, num_slots)).
struct BlockCopy {
  int src_block = 0;
  int dst_block = 0;
  int num_slots = 0;
};

struct AppendPlan {
  std::vector<int> slots;         // one physical slot per appended token, in order
  std::vector<BlockCopy> copies;  // to execute before writing the new slots
};

struct SequenceOccupancy {
  SeqId id = -1;
  int tokens = 0;
  std::vector<int> block_table;  // logical block i -> physical block
  int wasted_slots = 0;          // unused slots in the last block
};

struct KvOccupancy {
  int blocks_total = 0;
  int blocks_used = 0;    // ref_count > 0 (a shared block counts once)
  int blocks_shared = 0;  // ref_count > 1
  int blocks_free = 0;
  int block_size = 0;
  int64_t bytes_per_layer_used = 0;          // blocks_used * bytes_per_block_per_layer
  int64_t bytes_per_layer_capacity = 0;      // blocks_total * bytes_per_block_per_layer
  int wasted_slots = 0;                      // sum over sequences' last blocks
  std::vector<SequenceOccupancy> sequences;  // ordered by id
  std::vector<int> ref_counts;               // per physical block
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheShape& shape);  // throws ts::Error on bad shape

  const KvCacheShape& shape() const { return shape_; }

  SeqId create();            // empty sequence
  SeqId fork(SeqId parent);  // shares all of parent's blocks (ref_count++)
  // Reserve slots for n new tokens at the end of seq. A shared partial last
  // block is copied first (copy-on-write). Throws ts::Error ("KV cache full:
  // ...") and changes nothing when there are not enough free blocks.
  AppendPlan append(SeqId seq, int n_tokens);
  // Blocks that append(seq, n) would need to take from the free list.
  int blocks_needed(SeqId seq, int n_tokens) const;
  void truncate(SeqId seq, int new_length);  // step back; frees emptied blocks
  // Undoes append(seq, n) exactly: the sequence goes back to old_length and a
  // block copied on write is given back for the shared block it replaced, so
  // the block table is what it was before the append. For rolling back a step
  // whose block copy or forward failed.
  void undo_append(SeqId seq, int old_length, const AppendPlan& plan);
  void release(SeqId seq);  // free the sequence

  bool contains(SeqId seq) const;
  int length(SeqId seq) const;
  const std::vector<int>& block_table(SeqId seq) const;
  int ref_count(int block) const;
  std::vector<SeqId> sequences() const;
  int free_blocks() const;
  KvOccupancy occupancy() const;

  // Recounts references from the block tables and compares with the stored
  // counts and the free list; throws ts::Error describing the first mismatch.
  void check_invariants() const;

 private:
  struct Sequence {
    int length = 0;
    std::vector<int> blocks;
  };
  const Sequence& get(SeqId seq) const;
  Sequence& get(SeqId seq);
  int take_free_block();
  void drop_block(int block);

  KvCacheShape shape_;
  std::vector<int> ref_counts_;
  std::vector<int> free_list_;  // stack of free physical blocks
  std::vector<Sequence> seqs_;  // indexed by SeqId; released ones have length -1
  std::vector<bool> live_;
};

}  // namespace ts
