// Paged KV cache bookkeeping: block tables, reference counts, a free list.
// See kv_cache.h for the model. Everything here is plain host code; the
// backends own the pools and execute the BlockCopy lists this file returns.
#include "engine/kv_cache.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <string>

#include "util/error.h"

namespace ts {

namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

KvCacheManager::KvCacheManager(const KvCacheShape& shape) : shape_(shape) {
  auto require_positive = [](int value, const char* field) {
    if (value <= 0) {
      throw Error(std::string("KV cache shape: ") + field + " must be positive, got " +
                  std::to_string(value));
    }
  };
  require_positive(shape.n_layer, "n_layer");
  require_positive(shape.n_head, "n_head");
  require_positive(shape.head_dim, "head_dim");
  require_positive(shape.block_size, "block_size");
  require_positive(shape.num_blocks, "num_blocks");
  // q8 cuts each head's slice of a row into blocks of 32 values.
  if (shape.format == WeightFormat::kQ8 && shape.head_dim % kQuantBlock != 0) {
    throw Error("--kv q8: the model's head_dim " + std::to_string(shape.head_dim) +
                " is not a multiple of 32 (q8 stores blocks of 32 values per head); use --kv "
                "f32, f16 or bf16");
  }
  // Slots are ints: block * block_size + offset must not overflow.
  if (int64_t(shape.num_blocks) * shape.block_size > INT_MAX) {
    throw Error("KV cache shape: num_blocks * block_size = " +
                std::to_string(int64_t(shape.num_blocks) * shape.block_size) +
                " slots exceeds the int range");
  }
  ref_counts_.assign(shape.num_blocks, 0);
  // The free list is a stack kept sorted in descending order, so back() is
  // always the lowest free block id: allocation is deterministic and packs
  // sequences towards the start of the pool (easier to read in the GUI).
  free_list_.resize(shape.num_blocks);
  for (int i = 0; i < shape.num_blocks; ++i) free_list_[i] = shape.num_blocks - 1 - i;
}

const KvCacheManager::Sequence& KvCacheManager::get(SeqId seq) const {
  if (seq < 0 || seq >= int(seqs_.size()) || !live_[seq]) {
    throw Error("unknown sequence " + std::to_string(seq));
  }
  return seqs_[seq];
}

KvCacheManager::Sequence& KvCacheManager::get(SeqId seq) {
  return const_cast<Sequence&>(static_cast<const KvCacheManager*>(this)->get(seq));
}

int KvCacheManager::take_free_block() {
  // Callers check capacity first; reaching this with an empty list is a bug.
  if (free_list_.empty()) throw Error("KV cache internal error: free list empty");
  const int block = free_list_.back();
  free_list_.pop_back();
  ref_counts_[block] = 1;
  return block;
}

void KvCacheManager::drop_block(int block) {
  if (ref_counts_[block] <= 0) {
    throw Error("KV cache internal error: dropping block " + std::to_string(block) +
                " with ref count " + std::to_string(ref_counts_[block]));
  }
  if (--ref_counts_[block] == 0) {
    // Keep the stack sorted descending (lowest id at the back).
    auto pos = std::lower_bound(free_list_.begin(), free_list_.end(), block, std::greater<int>());
    free_list_.insert(pos, block);
  }
}

SeqId KvCacheManager::create() {
  // Ids are never reused within one manager, so a stale id stays detectable.
  const SeqId id = SeqId(seqs_.size());
  seqs_.push_back(Sequence{});
  live_.push_back(true);
  return id;
}

SeqId KvCacheManager::fork(SeqId parent) {
  Sequence copy = get(parent);  // copy before push_back may reallocate seqs_
  for (int block : copy.blocks) ++ref_counts_[block];
  const SeqId id = SeqId(seqs_.size());
  seqs_.push_back(std::move(copy));
  live_.push_back(true);
  return id;
}

int KvCacheManager::blocks_needed(SeqId seq, int n_tokens) const {
  const Sequence& s = get(seq);
  if (n_tokens < 0) {
    throw Error("KV cache append: token count must be >= 0, got " + std::to_string(n_tokens));
  }
  if (n_tokens == 0) return 0;
  const int bs = shape_.block_size;
  int needed = 0;
  // Copy-on-write of a shared, partially filled last block.
  if (s.length % bs != 0 && ref_counts_[s.blocks.back()] > 1) needed += 1;
  const int64_t new_length = int64_t(s.length) + n_tokens;
  const int64_t new_blocks = (new_length + bs - 1) / bs - int64_t(s.blocks.size());
  const int64_t total = needed + new_blocks;
  return total > INT_MAX ? INT_MAX : int(total);
}

AppendPlan KvCacheManager::append(SeqId seq, int n_tokens) {
  const int needed = blocks_needed(seq, n_tokens);  // validates seq and n_tokens
  AppendPlan plan;
  if (n_tokens == 0) return plan;
  if (needed > int(free_list_.size())) {
    throw Error("KV cache full: need " + std::to_string(needed) + " blocks, " +
                std::to_string(free_list_.size()) + " free (capacity " +
                std::to_string(shape_.num_blocks) + " blocks of " +
                std::to_string(shape_.block_size) + " tokens)");
  }
  Sequence& s = get(seq);
  const int bs = shape_.block_size;
  const int filled = s.length % bs;  // slots used in the last block, 0 when full/empty
  if (filled != 0 && ref_counts_[s.blocks.back()] > 1) {
    const int old_block = s.blocks.back();
    const int new_block = take_free_block();
    plan.copies.push_back(BlockCopy{old_block, new_block, filled});
    s.blocks.back() = new_block;
    drop_block(old_block);  // stays > 0: someone else still holds it
  }
  plan.slots.reserve(n_tokens);
  for (int i = 0; i < n_tokens; ++i) {
    const int offset = s.length % bs;
    if (offset == 0) s.blocks.push_back(take_free_block());
    plan.slots.push_back(s.blocks.back() * bs + offset);
    ++s.length;
  }
  return plan;
}

void KvCacheManager::truncate(SeqId seq, int new_length) {
  Sequence& s = get(seq);
  if (new_length < 0 || new_length > s.length) {
    throw Error("KV cache truncate: new length " + std::to_string(new_length) + " outside [0, " +
                std::to_string(s.length) + "] for sequence " + std::to_string(seq));
  }
  // A kept block stays even when shared; a later append copies it on write.
  const size_t keep = size_t(ceil_div(new_length, shape_.block_size));
  while (s.blocks.size() > keep) {
    drop_block(s.blocks.back());
    s.blocks.pop_back();
  }
  s.length = new_length;
}

void KvCacheManager::undo_append(SeqId seq, int old_length, const AppendPlan& plan) {
  truncate(seq, old_length);
  Sequence& s = get(seq);
  // append copies at most one block: the shared, partly filled last one.
  for (const BlockCopy& cp : plan.copies) {
    if (s.blocks.empty() || s.blocks.back() != cp.dst_block || ref_counts_[cp.src_block] <= 0)
      throw Error("KV cache undo: sequence " + std::to_string(seq) +
                  " does not end with the block copied from block " + std::to_string(cp.src_block));
    ++ref_counts_[cp.src_block];
    s.blocks.back() = cp.src_block;
    drop_block(cp.dst_block);
  }
}

void KvCacheManager::release(SeqId seq) {
  Sequence& s = get(seq);
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) drop_block(*it);
  s.blocks.clear();
  s.blocks.shrink_to_fit();
  s.length = -1;
  live_[seq] = false;
}

bool KvCacheManager::contains(SeqId seq) const {
  return seq >= 0 && seq < int(seqs_.size()) && live_[seq];
}

int KvCacheManager::length(SeqId seq) const { return get(seq).length; }

const std::vector<int>& KvCacheManager::block_table(SeqId seq) const { return get(seq).blocks; }

int KvCacheManager::ref_count(int block) const {
  if (block < 0 || block >= shape_.num_blocks) {
    throw Error("KV cache: block " + std::to_string(block) + " outside [0, " +
                std::to_string(shape_.num_blocks) + ")");
  }
  return ref_counts_[block];
}

std::vector<SeqId> KvCacheManager::sequences() const {
  std::vector<SeqId> ids;
  for (int i = 0; i < int(seqs_.size()); ++i) {
    if (live_[i]) ids.push_back(i);
  }
  return ids;
}

int KvCacheManager::free_blocks() const { return int(free_list_.size()); }

KvOccupancy KvCacheManager::occupancy() const {
  const int bs = shape_.block_size;
  KvOccupancy occ;
  occ.blocks_total = shape_.num_blocks;
  occ.block_size = bs;
  occ.blocks_free = int(free_list_.size());
  occ.ref_counts = ref_counts_;
  for (int rc : ref_counts_) {
    if (rc > 0) ++occ.blocks_used;
    if (rc > 1) ++occ.blocks_shared;
  }
  const int64_t per_block = shape_.bytes_per_block_per_layer();
  occ.bytes_per_layer_used = int64_t(occ.blocks_used) * per_block;
  occ.bytes_per_layer_capacity = int64_t(occ.blocks_total) * per_block;

  // Total wasted slots, counted per physical block rather than per sequence:
  // a block's used slots are the most that any sequence referencing it reads
  // (a full block for any sequence that has it in the middle of its table).
  // So a partial last block shared by a parent and its forks counts once,
  // and a block that is full for one sequence but the truncated last block
  // of another wastes nothing. The per-sequence figure (below) is simply
  // blocks * block_size - length and does double count shared blocks.
  std::vector<int> max_used(shape_.num_blocks, 0);
  for (int id = 0; id < int(seqs_.size()); ++id) {
    if (!live_[id]) continue;
    const Sequence& s = seqs_[id];
    SequenceOccupancy so;
    so.id = id;
    so.tokens = s.length;
    so.block_table = s.blocks;
    so.wasted_slots = int(s.blocks.size()) * bs - s.length;
    occ.sequences.push_back(std::move(so));
    for (size_t i = 0; i < s.blocks.size(); ++i) {
      const int used = std::min(bs, s.length - int(i) * bs);
      max_used[s.blocks[i]] = std::max(max_used[s.blocks[i]], used);
    }
  }
  for (int b = 0; b < shape_.num_blocks; ++b) {
    if (ref_counts_[b] > 0) occ.wasted_slots += bs - max_used[b];
  }
  return occ;
}

void KvCacheManager::check_invariants() const {
  const int nb = shape_.num_blocks;
  const int bs = shape_.block_size;
  auto fail = [](const std::string& what) { throw Error("KV cache invariant broken: " + what); };
  if (int(ref_counts_.size()) != nb) fail("ref count table has the wrong size");
  if (seqs_.size() != live_.size()) fail("sequence and liveness tables differ in size");

  std::vector<int> recount(nb, 0);
  for (int id = 0; id < int(seqs_.size()); ++id) {
    const Sequence& s = seqs_[id];
    if (!live_[id]) {
      if (!s.blocks.empty())
        fail("released sequence " + std::to_string(id) + " still holds blocks");
      continue;
    }
    if (s.length < 0) fail("sequence " + std::to_string(id) + " has negative length");
    const int expect = ceil_div(s.length, bs);
    if (int(s.blocks.size()) != expect) {
      fail("sequence " + std::to_string(id) + " has " + std::to_string(s.blocks.size()) +
           " blocks for " + std::to_string(s.length) + " tokens (expected " +
           std::to_string(expect) + ")");
    }
    for (int b : s.blocks) {
      if (b < 0 || b >= nb) {
        fail("sequence " + std::to_string(id) + " refers to block " + std::to_string(b) +
             " outside [0, " + std::to_string(nb) + ")");
      }
      ++recount[b];
    }
  }
  for (int b = 0; b < nb; ++b) {
    if (recount[b] != ref_counts_[b]) {
      fail("block " + std::to_string(b) + " has ref count " + std::to_string(ref_counts_[b]) +
           " but " + std::to_string(recount[b]) + " table entries refer to it");
    }
  }
  std::vector<int> in_free(nb, 0);
  for (int b : free_list_) {
    if (b < 0 || b >= nb) fail("free list holds block " + std::to_string(b) + " outside the pool");
    if (++in_free[b] > 1) fail("block " + std::to_string(b) + " is in the free list twice");
    if (ref_counts_[b] != 0) {
      fail("block " + std::to_string(b) + " is in the free list with ref count " +
           std::to_string(ref_counts_[b]));
    }
  }
  for (int b = 0; b < nb; ++b) {
    if (ref_counts_[b] == 0 && in_free[b] == 0) {
      fail("block " + std::to_string(b) + " has ref count 0 but is not in the free list (leaked)");
    }
  }
  if (!std::is_sorted(free_list_.begin(), free_list_.end(), std::greater<int>())) {
    fail("free list is not ordered (lowest block id must be handed out first)");
  }
}

}  // namespace ts
