#pragma once
// Each CUDA kernel run once on host vectors: what the parity tests compare
// with the CPU twins (tests/gpu/cuda_backend_test.cpp). No CUDA types; every
// function needs a usable device (cuda_device_available) and throws ts::Error
// on a CUDA failure.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend.h"

namespace ts::cuda_check {

std::vector<float> embed(const std::vector<float>& wte, const std::vector<float>& wpe,
                         const std::vector<int>& tokens, const std::vector<int>& positions, int c);

// The 16-bit weight kernels (w holds bf16 bits when bf16, else f16 bits).
// matmul_half: y[m][n] = x[m][k] . w[k][n] (split: with the workspace it
// asks for, each split of k in blocks of its own; else one block runs them
// in turn); transposed: x . w[n][k]^T. Outputs start as NaN, so an output
// a kernel leaves unwritten shows.
std::vector<float> matmul_half(const std::vector<float>& x, int m, int k,
                               const std::vector<uint16_t>& w, bool bf16, int n, bool split);
std::vector<float> matmul_half_transposed(const std::vector<float>& x, int m, int k,
                                          const std::vector<uint16_t>& w, bool bf16, int n);
std::vector<float> embed_half(const std::vector<uint16_t>& wte, bool bf16,
                              const std::vector<float>& wpe, const std::vector<int>& tokens,
                              const std::vector<int>& positions, int c);

std::vector<float> layernorm(const std::vector<float>& x, const std::vector<float>& weight,
                             const std::vector<float>& bias, int rows, int c, float eps);

// x += y + y_bias; out = layernorm(x). x is updated in place.
std::vector<float> residual_layernorm(std::vector<float>& x, const std::vector<float>& y,
                                      const std::vector<float>& y_bias,
                                      const std::vector<float>& weight,
                                      const std::vector<float>& bias, int rows, int c, float eps);

std::vector<float> bias_gelu(const std::vector<float>& x, const std::vector<float>& bias, int rows,
                             int n);

// qkv (updated with the bias) and the pools (K and V rows written).
void bias_kv_append(std::vector<float>& qkv, const std::vector<float>& bias,
                    const std::vector<int>& slots, int c, std::vector<float>& k_pool,
                    std::vector<float>& v_pool);

// The Llama family's kernels (twins: cpu::rmsnorm, cpu::residual_rmsnorm,
// the matmul's bias + cpu::rope, cpu::swiglu). rope: bias empty = none.
std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& weight, int rows,
                           int c, float eps);
std::vector<float> residual_rmsnorm(std::vector<float>& x, const std::vector<float>& y,
                                    const std::vector<float>& weight, int rows, int c, float eps);
std::vector<float> rope(const std::vector<float>& qkv, int ld, const std::vector<float>& bias,
                        const std::vector<int>& positions, int n_head, int n_kv_head, int head_dim,
                        float theta);
std::vector<float> swiglu(const std::vector<float>& gate_up, int rows, int n);

std::vector<float> gather_rows(const std::vector<float>& src, const std::vector<int>& index, int c);

enum class AttentionKernel { kAuto, kRow, kTile };

struct AttentionResult {
  std::vector<float> out;                 // [rows][C]
  std::vector<std::vector<float>> probs;  // per entry [head][row][context] (when asked)
};

// The attention of the batch's new rows; qkv is [rows][q | k | v] with
// n_head query heads and n_kv_head (0: n_head) key and value heads, the pools
// [slot][n_kv_head * head_dim] hold every key and value the block tables point at. tile_size 0: the
// largest the device allows. probs_stride 0: exact rows (as a prefill); else
// this stride (as a decode graph).
AttentionResult paged_attention(const std::vector<BatchEntry>& batch, const std::vector<float>& qkv,
                                const std::vector<float>& k_pool, const std::vector<float>& v_pool,
                                int n_head, int head_dim, int block_size, AttentionKernel kernel,
                                bool probs, int tile_size = 0, int probs_stride = 0,
                                int n_kv_head = 0);

// The largest tile the attention tile kernel can use (0: none).
int attention_tile_size(int max_context, int head_dim);

// Device-to-device copy bandwidth (bytes read + bytes written per second,
// best of a few 1 GiB copies): the memory bound the GPU check reports decode
// speed against. Also names the device in *device.
double device_copy_bandwidth(std::string* device);

}  // namespace ts::cuda_check
