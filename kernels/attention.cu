// Causal multi-head attention of new query rows over the paged KV cache (or
// over a multi-branch pass's mask: row kernel only).
// CPU twin: cpu::attention (src/engine/cpu/attention.cpp).
//
// Two kernels with one contract (AttentionParams in kernels.cuh):
//  - the row kernel: one thread block per (query row, head). Decode rows and
//    short entries. Keys are spread over the threads (one key each), the
//    probabilities stay in shared memory, then P*V with each thread owning
//    four output dimensions of one key group (one when head_dim is not a
//    multiple of 4: both kernels load K and V as float4 only when it is).
//  - the tile kernel: one thread block per (tile of consecutive query rows of
//    one entry, head). Prefill. K and V are staged through shared memory in
//    chunks of kTileKeys keys and reused by every row of the tile.
// Both write the probabilities (masked part 0) when params.probs is set.
#include <algorithm>
#include <mutex>

#include "common.cuh"
#include "kernels.cuh"

namespace ts::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kTileKeys = 64;
constexpr int kMaxPairs = 8;  // (query row, dimension) outputs per thread in the tile kernel

// Width of one K (or V) row, and the KV head query head h reads (GQA).
__device__ __forceinline__ int kv_width(const AttentionParams& p) {
  return (p.n_kv_head > 0 ? p.n_kv_head : p.n_head) * p.head_dim;
}
__device__ __forceinline__ int kv_head_of(const AttentionParams& p, int h) {
  return p.n_kv_head > 0 ? h / (p.n_head / p.n_kv_head) : h;
}

// W consecutive floats of a K or V row: one float4 load when head_dim is a
// multiple of 4 (W = 4), else one float (W = 1; the other lanes are 0).
template <int W>
__device__ __forceinline__ float4 load_w(const float* p) {
  if constexpr (W == 4)
    return *reinterpret_cast<const float4*>(p);
  else
    return make_float4(*p, 0.0f, 0.0f, 0.0f);
}

template <int W>
__device__ __forceinline__ void store_w(float* dst, float4 v) {
  dst[0] = v.x;
  if constexpr (W == 4) {
    dst[1] = v.y;
    dst[2] = v.z;
    dst[3] = v.w;
  }
}

__device__ __forceinline__ int slot_of(const int* bt, int j, int block_size) {
  return bt[j / block_size] * block_size + j % block_size;
}

__device__ __forceinline__ float* probs_row(const AttentionParams& p, int e, int h, int local) {
  return p.probs + p.entry_probs_offset[e] +
         (static_cast<long long>(h) * p.entry_rows[e] + local) * p.entry_probs_stride[e];
}

// Shared memory (floats): q[head_dim] | scores[max_context] | partial[4 * kThreads]
template <int W>
__global__ void __launch_bounds__(kThreads) attention_row_kernel(const AttentionParams p) {
  extern __shared__ float smem[];
  __shared__ float scratch[32];
  const int r = p.row_list[blockIdx.x];
  const int h = blockIdx.y;
  const int hd = p.head_dim, c = p.n_head * hd, bs = p.block_size;
  const int kvc = kv_width(p), kh = kv_head_of(p, h), ld = c + 2 * kvc;
  const int e = p.row_entry[r];
  const int visible = p.row_key[r] + 1;
  // A masked row: the new keys from first_new on count only where its mask says.
  const int* mask = p.row_mask[r] >= 0 ? p.masks + p.row_mask[r] : nullptr;
  const int first_new = p.row_key[r] - p.row_local[r];
  const int* bt = p.block_tables + p.entry_bt_offset[e];
  float* q_s = smem;
  float* scores = q_s + hd;
  float* partial = scores + p.max_context;
  const float scale = 1.0f / sqrtf(static_cast<float>(hd));

  const float* q = p.qkv + static_cast<long long>(r) * ld + h * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) q_s[d] = q[d];
  __syncthreads();

  // Scores, one key per thread.
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < visible; j += blockDim.x) {
    const float* kr = p.k_pool + static_cast<long long>(slot_of(bt, j, bs)) * kvc + kh * hd;
    float s = 0.0f;
    for (int d = 0; d < hd; d += W) {
      const float4 k = load_w<W>(kr + d);
      s += q_s[d] * k.x;
      if constexpr (W == 4) {
        s += q_s[d + 1] * k.y;
        s += q_s[d + 2] * k.z;
        s += q_s[d + 3] * k.w;
      }
    }
    s *= scale;
    if (mask && j >= first_new && !mask[j - first_new]) s = -INFINITY;
    scores[j] = s;
    mx = fmaxf(mx, s);
  }
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < visible; j += blockDim.x) {
    const float ev = expf(scores[j] - mx);
    scores[j] = ev;
    sum += ev;
  }
  const float inv = 1.0f / block_sum(sum, scratch);
  for (int j = threadIdx.x; j < visible; j += blockDim.x) scores[j] *= inv;
  __syncthreads();

  if (p.probs) {
    const int context = p.entry_context[e];
    float* pr = probs_row(p, e, h, p.row_local[r]);
    for (int j = threadIdx.x; j < context; j += blockDim.x) pr[j] = j < visible ? scores[j] : 0.0f;
  }

  // P * V: thread = (key group g, W dimensions from W * d4).
  const int per_key = hd / W;
  const int groups = blockDim.x / per_key;
  const int g = threadIdx.x / per_key, d4 = threadIdx.x % per_key;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (g < groups) {
    for (int j = g; j < visible; j += groups) {
      const float4 v =
          load_w<W>(p.v_pool + static_cast<long long>(slot_of(bt, j, bs)) * kvc + kh * hd + W * d4);
      const float pj = scores[j];
      acc.x += pj * v.x;
      acc.y += pj * v.y;
      acc.z += pj * v.z;
      acc.w += pj * v.w;
    }
    store_w<W>(partial + g * hd + W * d4, acc);
  }
  __syncthreads();
  float* o = p.out + static_cast<long long>(r) * c + h * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float s = 0.0f;
    for (int gg = 0; gg < groups; ++gg) s += partial[gg * hd + d];
    o[d] = s;
  }
}

// Shared memory (floats): q[tile][head_dim] | kv[kTileKeys][head_dim + 1] |
// scores[tile][max_context]
template <int W>
__global__ void __launch_bounds__(kThreads) attention_tile_kernel(const AttentionParams p) {
  extern __shared__ float smem[];
  const int r0 = p.tile_row0[blockIdx.x], nr = p.tile_rows[blockIdx.x];
  const int h = blockIdx.y;
  const int hd = p.head_dim, c = p.n_head * hd, bs = p.block_size, per_key = hd / W;
  const int kvc = kv_width(p), kh = kv_head_of(p, h), ld = c + 2 * kvc;
  const int e = p.row_entry[r0];
  const int pos0 = p.row_key[r0];  // rows of a tile (causal) have keys pos0, pos0+1, ...
  const int visible_max = pos0 + nr;
  const int* bt = p.block_tables + p.entry_bt_offset[e];
  const int kv_stride = hd + 1;  // +1: a warp reading one dimension of 32 keys hits 32 banks
  const int s_stride = p.max_context;
  float* q_s = smem;
  float* kv_s = q_s + p.tile_size * hd;
  float* S = kv_s + kTileKeys * kv_stride;
  const float scale = 1.0f / sqrtf(static_cast<float>(hd));

  for (int idx = threadIdx.x; idx < nr * hd; idx += blockDim.x) {
    const int qr = idx / hd, d = idx % hd;
    q_s[idx] = p.qkv[static_cast<long long>(r0 + qr) * ld + h * hd + d];
  }

  auto stage = [&](const float* pool, int kc, int nk) {
    for (int idx = threadIdx.x; idx < nk * per_key; idx += blockDim.x) {
      const int key = idx / per_key, d4 = idx % per_key;
      const float4 v = load_w<W>(pool + static_cast<long long>(slot_of(bt, kc + key, bs)) * kvc +
                                 kh * hd + W * d4);
      store_w<W>(kv_s + key * kv_stride + W * d4, v);
    }
  };

  // Scores of every (row, key) pair in the causal triangle.
  for (int kc = 0; kc < visible_max; kc += kTileKeys) {
    const int nk = min(kTileKeys, visible_max - kc);
    __syncthreads();  // the previous chunk is consumed (and q_s is complete)
    stage(p.k_pool, kc, nk);
    __syncthreads();
    for (int idx = threadIdx.x; idx < nr * kTileKeys; idx += blockDim.x) {
      const int qr = idx / kTileKeys, key = idx % kTileKeys, j = kc + key;
      if (key >= nk || j > pos0 + qr) continue;
      const float* qv = q_s + qr * hd;
      const float* kv = kv_s + key * kv_stride;
      float s = 0.0f;
      for (int d = 0; d < hd; ++d) s += qv[d] * kv[d];
      S[qr * s_stride + j] = s * scale;
    }
  }
  __syncthreads();

  // Softmax, one warp per row.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int qr = warp; qr < nr; qr += warps) {
    const int vis = pos0 + qr + 1;
    float* Sr = S + qr * s_stride;
    float mx = -INFINITY;
    for (int j = lane; j < vis; j += 32) mx = fmaxf(mx, Sr[j]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j < vis; j += 32) {
      const float ev = expf(Sr[j] - mx);
      Sr[j] = ev;
      sum += ev;
    }
    const float inv = 1.0f / warp_sum(sum);
    for (int j = lane; j < vis; j += 32) Sr[j] *= inv;
    if (p.probs) {
      const int context = p.entry_context[e];
      float* pr = probs_row(p, e, h, p.row_local[r0 + qr]);
      for (int j = lane; j < context; j += 32) pr[j] = j < vis ? Sr[j] : 0.0f;
    }
  }

  // P * V: thread owns the (row, dimension) pairs tid, tid + blockDim, ...
  float acc[kMaxPairs];
#pragma unroll
  for (int i = 0; i < kMaxPairs; ++i) acc[i] = 0.0f;
  for (int kc = 0; kc < visible_max; kc += kTileKeys) {
    const int nk = min(kTileKeys, visible_max - kc);
    __syncthreads();  // softmax done / the previous chunk is consumed
    stage(p.v_pool, kc, nk);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kMaxPairs; ++i) {
      const int idx = threadIdx.x + i * blockDim.x;
      if (idx < nr * hd) {
        const int qr = idx / hd, d = idx % hd;
        const int kend = min(nk, pos0 + qr + 1 - kc);
        const float* Sr = S + qr * s_stride + kc;
        float a = acc[i];
        for (int key = 0; key < kend; ++key) a += Sr[key] * kv_s[key * kv_stride + d];
        acc[i] = a;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kMaxPairs; ++i) {
    const int idx = threadIdx.x + i * blockDim.x;
    if (idx < nr * hd) {
      const int qr = idx / hd, d = idx % hd;
      p.out[static_cast<long long>(r0 + qr) * c + h * hd + d] = acc[i];
    }
  }
}

size_t row_smem_bytes(int max_context, int head_dim) {
  return sizeof(float) * (static_cast<size_t>(head_dim) + max_context + 4 * kThreads);
}

size_t tile_smem_bytes(int tile, int max_context, int head_dim) {
  return sizeof(float) *
         (static_cast<size_t>(tile) * head_dim + static_cast<size_t>(kTileKeys) * (head_dim + 1) +
          static_cast<size_t>(tile) * max_context);
}

// Floats per K/V load: 4 (a float4) when head_dim allows it, else 1.
int width(int head_dim) { return head_dim % 4 == 0 ? 4 : 1; }

size_t smem_limit() {
  int dev = 0, optin = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
    return 48 * 1024;
  // Static shared memory (the reduction scratch) comes out of the same budget.
  return static_cast<size_t>(optin) - 256;
}

}  // namespace

// ---- launch ----
int attention_tile_size(int max_context, int head_dim) {
  if (head_dim <= 0 || head_dim / width(head_dim) > kThreads) return 0;
  int tile = std::min(16, kMaxPairs * kThreads / head_dim);
  const size_t limit = smem_limit();
  while (tile > 0 && tile_smem_bytes(tile, max_context, head_dim) > limit) --tile;
  return tile;
}

bool attention_row_kernel_fits(int max_context, int head_dim) {
  return head_dim > 0 && head_dim / width(head_dim) <= kThreads &&
         row_smem_bytes(max_context, head_dim) <= smem_limit();
}

cudaError_t attention_prepare() {
  // Raise both kernels' dynamic shared memory limit to the device's opt-in
  // maximum once, before any CUDA graph capture (the attribute call is not a
  // stream operation). The launch still asks only for what it needs.
  static std::once_flag once;
  static cudaError_t status = cudaSuccess;
  std::call_once(once, [] {
    const int limit = static_cast<int>(smem_limit());
    const void* kernels[] = {reinterpret_cast<const void*>(attention_row_kernel<4>),
                             reinterpret_cast<const void*>(attention_row_kernel<1>),
                             reinterpret_cast<const void*>(attention_tile_kernel<4>),
                             reinterpret_cast<const void*>(attention_tile_kernel<1>)};
    for (const void* k : kernels)
      if (status == cudaSuccess)
        status = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, limit);
  });
  return status;
}

cudaError_t attention(const AttentionParams& p, cudaStream_t stream) {
  if (p.row_list_size > 0) {
    const size_t smem = row_smem_bytes(p.max_context, p.head_dim);
    const dim3 grid(p.row_list_size, p.n_head);
    if (width(p.head_dim) == 4)
      attention_row_kernel<4><<<grid, kThreads, smem, stream>>>(p);
    else
      attention_row_kernel<1><<<grid, kThreads, smem, stream>>>(p);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  if (p.tiles > 0) {
    const size_t smem = tile_smem_bytes(p.tile_size, p.max_context, p.head_dim);
    const dim3 grid(p.tiles, p.n_head);
    if (width(p.head_dim) == 4)
      attention_tile_kernel<4><<<grid, kThreads, smem, stream>>>(p);
    else
      attention_tile_kernel<1><<<grid, kThreads, smem, stream>>>(p);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace ts::kernels
