#pragma once
// Launch functions of TokenScope's CUDA kernels. Every kernel has a CPU twin
// (named beside each declaration) and a parity test in
// tests/gpu/cuda_backend_test.cpp. CUDA types stay inside kernels/ and
// src/engine/cuda/: nothing above the engine includes this header.
//
// Conventions: fp32, row-major, one stream per call; a launch function checks
// the launch (cudaGetLastError) and returns its status, it never synchronises.
#include <cuda_runtime.h>

#include <string>

namespace ts::kernels {

// out[r] = wte[tokens[r]] + wpe[positions[r]].            Twin: cpu::embed
cudaError_t embed(const float* wte, const float* wpe, const int* tokens, const int* positions,
                  int rows, int c, float* out, cudaStream_t stream);

// out = layernorm(x) row by row (biased variance).         Twin: cpu::layernorm
cudaError_t layernorm(const float* x, const float* weight, const float* bias, int rows, int c,
                      float eps, float* out, cudaStream_t stream);

// The residual add fused with the next layer norm:
//   x += y + y_bias;  out = layernorm(x).
// Twin: cpu::residual_layernorm (the bias is the one the CPU matmul adds).
cudaError_t residual_layernorm(float* x, const float* y, const float* y_bias, const float* weight,
                               const float* bias, int rows, int c, float eps, float* out,
                               cudaStream_t stream);

// x[r][i] = gelu_new(x[r][i] + bias[i]).                   Twin: cpu::gelu
cudaError_t bias_gelu(float* x, const float* bias, int rows, int n, cudaStream_t stream);

// qkv rows are q | k | v (q, kv, kv values; GPT-2: q = kv = C).
// qkv[r] += bias (none when null); then K = qkv[r][q..q+kv) and
// V = qkv[r][q+kv..q+2kv) are written to pool slot slots[r] ([slot][kv]
// pools of one layer).
// Twin: the bias the CPU matmul adds + cpu::kv_append.
cudaError_t bias_kv_append(float* qkv, const float* bias, const int* slots, int rows, int q, int kv,
                           float* k_pool, float* v_pool, cudaStream_t stream);

// ---- 16-bit weights (bf16 or f16), fp32 activations and sums ----
//
// Each weight is widened exactly to fp32 as it is read: the products are the
// CPU's and only the order of the fp32 sums differs. A row's sums never
// depend on how many rows the call has (a decode row equals a prefill's).
// The weights start on a 4-byte boundary (they are read two values a load).
enum class HalfFormat { kBf16, kF16 };

// y[m][n] = x[m][k] . w[k][n], w row-major [in, out] in `format`.
// Twin: cpu::matmul on a MatrixView in that format. With a workspace of at
// least matmul_half_workspace(m, k, n) floats, k's splits run in blocks of
// their own (what a decode step needs to fill the GPU); without, one block
// runs them in turn. The bits are the same.
cudaError_t matmul_half(const float* x, int m, int k, const void* w, HalfFormat format, int n,
                        float* y, float* workspace, size_t workspace_floats, cudaStream_t stream);
// Floats of workspace that matmul_half needs for m rows (0: none).
size_t matmul_half_workspace(int m, int k, int n);

// y[m][n] = x[m][k] . b[n][k]^T (the unembedding, b = wte or lm_head).
// Twin: cpu::matmul_transposed on a MatrixView in that format.
cudaError_t matmul_half_transposed(const float* x, int m, int k, const void* b, HalfFormat format,
                                   int n, float* y, cudaStream_t stream);

// embed with wte in `format` (each value widened as it is read; in
// embedding.cu). Twin: cpu::embed on a MatrixView.
cudaError_t embed_half(const void* wte, HalfFormat format, const float* wpe, const int* tokens,
                       const int* positions, int rows, int c, float* out, cudaStream_t stream);

// ---- the Llama family ----

// out = rmsnorm(x) = x / sqrt(mean(x^2) + eps) * weight, row by row.
// Twin: cpu::rmsnorm
cudaError_t rmsnorm(const float* x, const float* weight, int rows, int c, float eps, float* out,
                    cudaStream_t stream);

// x += y; out = rmsnorm(x).                                Twin: cpu::residual_rmsnorm
cudaError_t residual_rmsnorm(float* x, const float* y, const float* weight, int rows, int c,
                             float eps, float* out, cudaStream_t stream);

// qkv: [rows][ld]. qkv[r] += bias (all ld values; none when null), then the
// first n_head heads (q) and the n_kv_head heads after them (k) are rotated
// in place (RoPE, rotate-half layout) at position positions[r].
// Twin: the bias the CPU matmul adds + cpu::rope.
cudaError_t rope(float* qkv, int ld, const float* bias, const int* positions, int rows, int n_head,
                 int n_kv_head, int head_dim, float theta, cudaStream_t stream);

// out[r][i] = silu(gate_up[r][i]) * gate_up[r][n + i].      Twin: cpu::swiglu
cudaError_t swiglu(const float* gate_up, int rows, int n, float* out, cudaStream_t stream);

// dst[i] = src[index[i]] for n rows of c floats (dst rows are contiguous,
// dst_stride floats apart).                                Twin: memcpy
cudaError_t gather_rows(const float* src, const int* index, int n, int c, float* dst,
                        int dst_stride, cudaStream_t stream);

// ---- causal attention over the paged KV cache (twin: cpu::attention) ----
//
// Rows are the new tokens of every entry of a batch, entry after entry. All
// per-row and per-entry values live in device memory so a decode step can be
// replayed from a CUDA graph with new metadata.
struct AttentionParams {
  // [rows][q | k | v]: n_head query heads, then n_kv_head key and value heads;
  // the query of head h at columns h*head_dim
  const float* qkv = nullptr;
  const float* k_pool = nullptr;  // [slot][n_kv_head * head_dim] of this layer
  const float* v_pool = nullptr;
  float* out = nullptr;            // [rows][n_head * head_dim]
  float* probs = nullptr;          // nullptr, or this layer's probability region
  const int* row_entry = nullptr;  // [rows] entry of each row
  const int* row_local = nullptr;  // [rows] index of the row inside its entry
  const int* row_key = nullptr;    // [rows] its key's index (the row sees keys 0..key)
  // Multi-branch passes: row_mask[r] >= 0 is the offset in masks of row r's
  // mask over its entry's new tokens (1 = attends); -1 = causal. A masked
  // row sees every cached key and the new keys its mask names.
  const int* row_mask = nullptr;
  const int* masks = nullptr;
  const int* entry_context = nullptr;       // [entries] start_pos + new tokens
  const int* entry_rows = nullptr;          // [entries] new tokens
  const int* entry_bt_offset = nullptr;     // [entries] start of its block table in block_tables
  const int* entry_probs_offset = nullptr;  // [entries] floats into probs
  const int* entry_probs_stride = nullptr;  // [entries] floats per probability row (>= context)
  const int* block_tables = nullptr;
  // Rows done one per thread block ("row kernel": decode and short entries).
  const int* row_list = nullptr;
  int row_list_size = 0;
  // Tiles of consecutive rows of one entry ("tile kernel": prefill).
  const int* tile_row0 = nullptr;  // first global row of each tile
  const int* tile_rows = nullptr;  // rows in each tile (<= tile_size)
  int tiles = 0;
  int tile_size = 0;  // from attention_tile_size()
  int n_head = 0;
  // Grouped-query attention: query head h reads KV head h / (n_head / n_kv_head).
  // 0: n_kv_head = n_head (GPT-2).
  int n_kv_head = 0;
  int head_dim = 0;     // a multiple of 4 reads K and V as float4
  int block_size = 0;   // KV cache tokens per block
  int max_context = 0;  // >= every entry's context (sizes shared memory)
};
// probs[entry_probs_offset[e] + (h * entry_rows[e] + local) * stride + j]
// holds the probability of key j for j < context (0 beyond the causal limit
// and where a pass mask hides the key).

// Largest tile (query rows per block) the tile kernel can use for this
// context and head size on the current device; 0 when even one row does not
// fit in shared memory.
int attention_tile_size(int max_context, int head_dim);
// Shared memory the row kernel needs; fails for contexts it cannot hold.
bool attention_row_kernel_fits(int max_context, int head_dim);
// Raises the kernels' shared memory limit to the device's maximum (once per
// process). Call before the first attention() and before any graph capture.
cudaError_t attention_prepare();
// Launches the row kernel over row_list and the tile kernel over the tiles.
cudaError_t attention(const AttentionParams& params, cudaStream_t stream);

// True when this build's kernels can run on the current device; otherwise
// false with a reason (e.g. built for sm_90, device is sm_80).
bool kernels_loadable(std::string* why);

}  // namespace ts::kernels
