// The QKV bias add fused with the append of this step's keys and values to
// the paged pools (slot = block * block_size + offset, decided by the host's
// KvCacheManager). CPU twin: the bias the CPU matmul adds +
// cpu::kv_append (src/engine/cpu/kv_append.cpp).
#include "common.cuh"
#include "kernels.cuh"

namespace ts::kernels {
namespace {

__global__ void bias_kv_append_kernel(float* __restrict__ qkv, const float* __restrict__ bias,
                                      const int* __restrict__ slots, int rows, int q, int kv,
                                      float* __restrict__ k_pool, float* __restrict__ v_pool) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int ld = q + 2 * kv;
  if (i >= ld) return;
  const float b = bias ? bias[i] : 0.0f;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {  // rows may exceed grid y's limit
    float* row = qkv + static_cast<long long>(r) * ld;
    const float v = row[i] + b;
    if (bias) row[i] = v;
    if (i < q) continue;
    const long long slot = slots[r];
    if (i < q + kv)
      k_pool[slot * kv + (i - q)] = v;
    else
      v_pool[slot * kv + (i - q - kv)] = v;
  }
}

}  // namespace

// ---- launch ----
cudaError_t bias_kv_append(float* qkv, const float* bias, const int* slots, int rows, int q, int kv,
                           float* k_pool, float* v_pool, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  bias_kv_append_kernel<<<dim3(ceil_div(q + 2LL * kv, 256), grid_rows(rows)), 256, 0, stream>>>(
      qkv, bias, slots, rows, q, kv, k_pool, v_pool);
  return cudaGetLastError();
}

}  // namespace ts::kernels
