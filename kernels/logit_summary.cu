// Top-k and softmax summary of logit rows, so that only what the GUI shows
// crosses to the host. One thread block per row:
//  1. max, then sum(exp(l - max)) and sum(exp(l - max) * (l - max)) -> the
//     log-sum-exp and the entropy of the softmax;
//  2. each thread keeps a sorted top-k of the logits it visits;
//  3. k rounds of a block-wide arg-max over the threads' list heads.
// Order: larger logit first, the smaller id on ties; NaN counts as -inf.
// CPU twin: cpu::summarize_logits (src/engine/cpu/logit_summary.cpp).
#include <climits>

#include "common.cuh"
#include "kernels.cuh"

namespace ts::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ bool better(float a, int ia, float b, int ib) {
  return a > b || (a == b && ia < ib);
}

__device__ __forceinline__ float clean(float v) { return isnan(v) ? -INFINITY : v; }

__global__ void __launch_bounds__(kThreads)
    logit_summary_kernel(const float* __restrict__ logits, int vocab, int k,
                         int* __restrict__ top_ids, float* __restrict__ top_logits,
                         float* __restrict__ top_probs, float* __restrict__ stats) {
  __shared__ float scratch[32];
  __shared__ float win_v[32];
  __shared__ int win_i[32];
  const int r = blockIdx.x;
  const float* l = logits + static_cast<long long>(r) * vocab;

  float mx = -INFINITY;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) mx = fmaxf(mx, clean(l[i]));
  mx = block_max(mx, scratch);
  float s = 0.0f, t = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float d = clean(l[i]) - mx;
    const float ev = expf(d);
    s += ev;
    if (ev > 0.0f) t += ev * d;
  }
  s = block_sum(s, scratch);
  t = block_sum(t, scratch);
  const float lse = mx + logf(s);

  // Per-thread sorted top-k (strided visit order: ids increase, so an equal
  // value found later never moves ahead of an earlier one).
  float lv[kMaxTopK];
  int li[kMaxTopK];
  int n = 0;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = clean(l[i]);
    if (n == k && !better(v, i, lv[k - 1], li[k - 1])) continue;
    int at = n < k ? n++ : k - 1;
    while (at > 0 && better(v, i, lv[at - 1], li[at - 1])) {
      lv[at] = lv[at - 1];
      li[at] = li[at - 1];
      --at;
    }
    lv[at] = v;
    li[at] = i;
  }

  // Merge: k rounds of a block arg-max over the list heads.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  int head = 0;
  for (int round = 0; round < k; ++round) {
    float v = head < n ? lv[head] : -INFINITY;
    int id = head < n ? li[head] : INT_MAX;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(kFullMask, v, o);
      const int oi = __shfl_xor_sync(kFullMask, id, o);
      if (better(ov, oi, v, id)) {
        v = ov;
        id = oi;
      }
    }
    __syncthreads();  // the previous round's winners have been read
    if (lane == 0) {
      win_v[warp] = v;
      win_i[warp] = id;
    }
    __syncthreads();
    v = lane < warps ? win_v[lane] : -INFINITY;
    id = lane < warps ? win_i[lane] : INT_MAX;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(kFullMask, v, o);
      const int oi = __shfl_xor_sync(kFullMask, id, o);
      if (better(ov, oi, v, id)) {
        v = ov;
        id = oi;
      }
    }
    if (head < n && li[head] == id) ++head;  // ids are unique: one owner advances
    if (threadIdx.x == 0) {
      const long long at = static_cast<long long>(r) * k + round;
      const bool found = id != INT_MAX;
      top_ids[at] = found ? id : -1;
      top_logits[at] = found ? v : -INFINITY;
      top_probs[at] = found ? expf(v - lse) : 0.0f;
    }
  }
  if (threadIdx.x == 0) {
    stats[r * 3 + 0] = mx;
    stats[r * 3 + 1] = lse;
    stats[r * 3 + 2] = logf(s) - t / s;
  }
}

}  // namespace

// ---- launch ----
cudaError_t logit_summary(const float* logits, int rows, int vocab, int k, int* top_ids,
                          float* top_logits, float* top_probs, float* stats, cudaStream_t stream) {
  if (k < 1 || k > kMaxTopK || vocab < 1) return cudaErrorInvalidValue;
  if (rows <= 0) return cudaSuccess;
  logit_summary_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, k, top_ids, top_logits,
                                                      top_probs, stats);
  return cudaGetLastError();
}

}  // namespace ts::kernels
