#pragma once
// Causal multi-head attention of the new query rows over a layer's paged KV
// cache. CPU twin of kernels/attention.cu (kernels::attention).
//   for each head h and row r at position pos:
//     p_j = softmax_j(q_h . k_h[j] / sqrt(head_dim))  over keys j = 0..pos
//     out_h[r] = sum_j p_j v_h[j]
// Key j of an entry lives at pool slot context_slots[j] (from its block table).
// With a pass mask (a multi-branch pass), row r sees the cached keys
// 0..start_pos-1 and the new keys start_pos + j with mask[r * rows + j] set,
// in increasing order: the same sums, in the same order, as running the row's
// branch alone (bit for bit).
// The pools hold K and V in kv_format (f32, f16, bf16 or q8): a cached value
// is widened to fp32 as it is loaded (q8: d * q, exact in fp32, read straight
// from the blocks, no dequantised copy) and every sum is fp32, in the same
// order for every format, so a 16-bit or q8 cache gives bit for bit what an
// fp32 cache holding the same (rounded, or dequantised) values gives. A q8
// pool row is kv_dim / 32 BlockQ8s; head_dim must be a multiple of 32.
#include "model/weight_format.h"

namespace ts::cpu {

struct AttentionArgs {
  const float* q = nullptr;  // [rows][ldq], head h at columns h*head_dim
  int ldq = 0;
  const void* k_pool = nullptr;  // [slot][n_kv_head*head_dim] values in kv_format
  const void* v_pool = nullptr;
  WeightFormat kv_format = WeightFormat::kF32;
  const int* context_slots = nullptr;  // physical slot of each position 0..context-1
  int start_pos = 0;                   // position of row 0
  int rows = 0;
  int n_head = 0;
  int head_dim = 0;
  // KV heads in the pools (grouped-query attention; 0 = n_head): query head
  // h reads KV head h / (n_head / n_kv_head). Pool rows hold n_kv_head heads.
  int n_kv_head = 0;
  float* out = nullptr;    // [rows][n_head*head_dim]
  float* probs = nullptr;  // optional [n_head][rows][context], 0 beyond the causal limit
  int context = 0;         // start_pos + rows
  const unsigned char* mask = nullptr;  // optional [rows][rows]; null = causal
};

// Computes one (head range, row range) piece of one entry; the backend
// spreads the pieces over its threads. A head's result does not depend on
// which heads share its piece.
void attention(const AttentionArgs& args, int head_begin, int head_end, int row_begin, int row_end);

}  // namespace ts::cpu
