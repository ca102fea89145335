#pragma once
// Causal multi-head attention of new query rows over a paged KV cache.
// CPU twin of kernels/attention.cu.

namespace ts::cpu {

struct PagedAttentionArgs {
  const float* q = nullptr;  // [rows][ldq], head h at columns h*head_dim
  int ldq = 0;
  const float* k_pool = nullptr;  // [slot][n_head*head_dim]
  const float* v_pool = nullptr;
  const int* context_slots = nullptr;  // physical slot of each position 0..context-1
  int start_pos = 0;                   // position of row 0
  int rows = 0;
  int n_head = 0;
  int head_dim = 0;
  float* out = nullptr;    // [rows][n_head*head_dim]
  float* probs = nullptr;  // optional [n_head][rows][context]
  int context = 0;         // start_pos + rows
};

// Computes one (head, row range) piece; the backend spreads pieces over threads.
void paged_attention(const PagedAttentionArgs& args, int head, int row_begin, int row_end);

}  // namespace ts::cpu
