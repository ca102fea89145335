#pragma once
// Device helpers shared by the kernels: warp and block reductions, and the
// readers that widen a stored weight to fp32.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ts::kernels {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Block-wide sum / max that every thread receives. blockDim.x must be a
// multiple of 32; scratch is 32 floats of shared memory. The leading barrier
// lets consecutive calls reuse the same scratch.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_sum(lane < warps ? scratch[lane] : 0.0f);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_max(lane < warps ? scratch[lane] : -INFINITY);
}

// A stored weight as fp32, exactly: Stored is what the tensor holds.
struct ReadF32 {
  using Stored = float;
  __device__ __forceinline__ float operator()(float v) const { return v; }
};
struct ReadBf16 {
  using Stored = uint16_t;
  __device__ __forceinline__ float operator()(uint16_t u) const {
    return __uint_as_float(static_cast<uint32_t>(u) << 16);
  }
};
struct ReadF16 {
  using Stored = uint16_t;
  __device__ __forceinline__ float operator()(uint16_t u) const {
    return __half2float(__ushort_as_half(u));
  }
};

inline unsigned ceil_div(long long a, long long b) {
  return static_cast<unsigned>((a + b - 1) / b);
}

// A grid's y dimension is limited to 65,535 blocks: kernels that put rows on
// y launch min(rows, this) and loop over rows with stride gridDim.y.
constexpr int kMaxGridY = 65535;
inline unsigned grid_rows(int rows) {
  return static_cast<unsigned>(rows < kMaxGridY ? rows : kMaxGridY);
}

}  // namespace ts::kernels
