// Linear layers on 16-bit weights (bf16 or f16) with fp32 activations and
// fp32 sums: each weight is widened exactly to fp32 as it is read, so the
// products are the CPU's (cpu::matmul and cpu::matmul_transposed on a
// MatrixView in that format) and only the order of the fp32 sums differs.
//
// Every output is summed in an order fixed by k alone: the number of rows in
// the call, and which tile a row lands in, never change a row's bits, so a
// decode step's matmuls equal the same row of a prefill's.
#include <algorithm>
#include <cstdint>

#include "common.cuh"
#include "kernels.cuh"

namespace ts::kernels {
namespace {

constexpr int kWarps = 8;     // warps per block (256 threads)
constexpr int kRows = 8;      // activation rows a block takes at once
constexpr int kColumns = 64;  // matmul_half: output columns per block, two a lane
constexpr int kRunK = 32;     // matmul_half: k values one warp sums in order (a run)
constexpr int kOuts = kRows * kColumns / (32 * kWarps);  // tile outputs per thread

// y[m][n] = x[m][k] . w[k][n] (w row-major [in, out]) is summed the same way
// for every row: k is cut into runs of kRunK values, each summed in order by
// one warp, the runs grouped eight to a split (one per warp of a block); a
// split's sum adds its runs in warp order, and the output adds the splits in
// order. A decode step (few rows) gives each split a block of its own and
// adds the splits in a second kernel; more rows run every split in one block
// in turn. Both give the same bits.

// Split z of the block's tile (rows r0.., columns col0..col0+63): each lane
// takes two adjacent columns (one 32-bit load when n is even, w then being
// 4-byte aligned). out[i] receives the split's sum for the thread's output
// threadIdx.x + i * blockDim.x of the tile (row o / kColumns, column
// o % kColumns; 0 past the matrix).
template <typename Read>
__device__ __forceinline__ void split_sums(const float* __restrict__ x, int k,
                                           const uint16_t* __restrict__ w, int n, int r0, int rows,
                                           int col0, int z,
                                           float (&partial)[kWarps][kRows][kColumns],
                                           float (&out)[kOuts]) {
  const Read widen;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col = col0 + 2 * lane;
  const int k0 = min(k, (z * kWarps + warp) * kRunK), k1 = min(k, k0 + kRunK);
  const bool pairs = (n % 2) == 0;
  float acc[kRows][2];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = 0.0f;
  if (col < n) {
#pragma unroll 4
    for (int kk = k0; kk < k1; ++kk) {
      const uint16_t* wp = w + static_cast<long long>(kk) * n + col;
      float w0, w1 = 0.0f;
      if (pairs) {
        const uint32_t u = *reinterpret_cast<const uint32_t*>(wp);
        w0 = widen(static_cast<uint16_t>(u & 0xffffu));
        w1 = widen(static_cast<uint16_t>(u >> 16));
      } else {
        w0 = widen(wp[0]);
        if (col + 1 < n) w1 = widen(wp[1]);
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r < rows) {
          const float xv = x[static_cast<long long>(r0 + r) * k + kk];
          acc[r][0] = fmaf(xv, w0, acc[r][0]);
          acc[r][1] = fmaf(xv, w1, acc[r][1]);
        }
      }
    }
  }
  __syncthreads();  // partial's last readers are done
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    reinterpret_cast<float2*>(&partial[warp][r][0])[lane] = make_float2(acc[r][0], acc[r][1]);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kOuts; ++i) {
    const int o = threadIdx.x + i * blockDim.x, r = o / kColumns, c = o % kColumns;
    float s = partial[0][r][c];
#pragma unroll
    for (int v = 1; v < kWarps; ++v) s += partial[v][r][c];
    out[i] = s;
  }
}

__host__ __device__ inline int splits_of(int k) {
  const int runs = (k + kRunK - 1) / kRunK;
  return runs > kWarps ? (runs + kWarps - 1) / kWarps : 1;
}

// Every split in turn, added in order in registers: rows on grid y.
template <typename Read>
__global__ void matmul_half_kernel(const float* __restrict__ x, int m, int k,
                                   const uint16_t* __restrict__ w, int n, float* __restrict__ y) {
  __shared__ __align__(16) float partial[kWarps][kRows][kColumns];
  const int col0 = blockIdx.x * kColumns, splits = splits_of(k);
  for (int r0 = blockIdx.y * kRows; r0 < m; r0 += gridDim.y * kRows) {
    const int rows = min(kRows, m - r0);
    float total[kOuts], s[kOuts];
    for (int z = 0; z < splits; ++z) {
      split_sums<Read>(x, k, w, n, r0, rows, col0, z, partial, s);
#pragma unroll
      for (int i = 0; i < kOuts; ++i) total[i] = z == 0 ? s[i] : total[i] + s[i];
    }
#pragma unroll
    for (int i = 0; i < kOuts; ++i) {
      const int o = threadIdx.x + i * blockDim.x, r = o / kColumns, c = o % kColumns;
      if (r < rows && col0 + c < n) y[static_cast<long long>(r0 + r) * n + col0 + c] = total[i];
    }
  }
}

// One split per block (z = blockIdx.z): its sums into parts[z][m][n].
template <typename Read>
__global__ void matmul_half_split_kernel(const float* __restrict__ x, int m, int k,
                                         const uint16_t* __restrict__ w, int n,
                                         float* __restrict__ parts) {
  __shared__ __align__(16) float partial[kWarps][kRows][kColumns];
  const int col0 = blockIdx.x * kColumns, z = blockIdx.z;
  float* part = parts + static_cast<long long>(z) * m * n;
  for (int r0 = blockIdx.y * kRows; r0 < m; r0 += gridDim.y * kRows) {
    const int rows = min(kRows, m - r0);
    float s[kOuts];
    split_sums<Read>(x, k, w, n, r0, rows, col0, z, partial, s);
#pragma unroll
    for (int i = 0; i < kOuts; ++i) {
      const int o = threadIdx.x + i * blockDim.x, r = o / kColumns, c = o % kColumns;
      if (r < rows && col0 + c < n) part[static_cast<long long>(r0 + r) * n + col0 + c] = s[i];
    }
  }
}

// y[i] = the splits' sums added in order (as matmul_half_kernel does).
__global__ void add_splits_kernel(const float* __restrict__ parts, int splits, long long count,
                                  float* __restrict__ y) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float total = parts[i];
    for (int z = 1; z < splits; ++z) total += parts[z * count + i];
    y[i] = total;
  }
}

// y[m][n] = x[m][k] . b[n][k]^T (the unembedding: b is wte or lm_head,
// row-major [vocab, C]). One warp per output column: its lanes read the
// column's row of b along k (two values a load when k is even) for up to
// eight activation rows at once, then add their sums in a fixed butterfly.
template <typename Read>
__global__ void matmul_half_transposed_kernel(const float* __restrict__ x, int m, int k,
                                              const uint16_t* __restrict__ b, int n,
                                              float* __restrict__ y) {
  const Read widen;
  const int lane = threadIdx.x & 31;
  const int j = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (j >= n) return;  // a whole warp leaves together
  const uint16_t* row = b + static_cast<long long>(j) * k;
  const bool pairs = (k % 2) == 0;  // row + kk is then 4-byte aligned
  for (int r0 = blockIdx.y * kRows; r0 < m; r0 += gridDim.y * kRows) {
    const int rows = min(kRows, m - r0);
    float acc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
    if (pairs) {
      for (int kk = 2 * lane; kk < k; kk += 64) {
        const uint32_t u = *reinterpret_cast<const uint32_t*>(row + kk);
        const float w0 = widen(static_cast<uint16_t>(u & 0xffffu));
        const float w1 = widen(static_cast<uint16_t>(u >> 16));
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (r < rows) {
            const float* xr = x + static_cast<long long>(r0 + r) * k + kk;
            acc[r] = fmaf(xr[1], w1, fmaf(xr[0], w0, acc[r]));
          }
        }
      }
    } else {
      for (int kk = lane; kk < k; kk += 32) {
        const float w0 = widen(row[kk]);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          if (r < rows) acc[r] = fmaf(x[static_cast<long long>(r0 + r) * k + kk], w0, acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float s = warp_sum(acc[r]);  // every lane receives the same sum
      if (lane == 0 && r < rows) y[static_cast<long long>(r0 + r) * n + j] = s;
    }
  }
}

// Row tiles on grid y: at most kMaxGridY blocks, each looping over its tiles.
unsigned row_tiles(int m) { return grid_rows(static_cast<int>(ceil_div(m, kRows))); }

using Kernel = void (*)(const float*, int, int, const uint16_t*, int, float*);

}  // namespace

// ---- launch ----
size_t matmul_half_workspace(int m, int k, int n) {
  const int splits = splits_of(k);
  return splits > 1 ? static_cast<size_t>(splits) * m * n : 0;
}

cudaError_t matmul_half(const float* x, int m, int k, const void* w, HalfFormat format, int n,
                        float* y, float* workspace, size_t workspace_floats, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  const bool bf16 = format == HalfFormat::kBf16;
  const auto* w16 = static_cast<const uint16_t*>(w);
  const int splits = splits_of(k);
  const size_t need = matmul_half_workspace(m, k, n);
  if (need > 0 && workspace && need <= workspace_floats) {
    const Kernel split =
        bf16 ? matmul_half_split_kernel<ReadBf16> : matmul_half_split_kernel<ReadF16>;
    split<<<dim3(ceil_div(n, kColumns), row_tiles(m), splits), 32 * kWarps, 0, stream>>>(
        x, m, k, w16, n, workspace);
    const long long count = static_cast<long long>(m) * n;
    add_splits_kernel<<<static_cast<unsigned>(std::min<long long>(ceil_div(count, 256), 65535)),
                        256, 0, stream>>>(workspace, splits, count, y);
  } else {
    const Kernel whole = bf16 ? matmul_half_kernel<ReadBf16> : matmul_half_kernel<ReadF16>;
    whole<<<dim3(ceil_div(n, kColumns), row_tiles(m)), 32 * kWarps, 0, stream>>>(x, m, k, w16, n,
                                                                                 y);
  }
  return cudaGetLastError();
}

cudaError_t matmul_half_transposed(const float* x, int m, int k, const void* b, HalfFormat format,
                                   int n, float* y, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  const Kernel kernel = format == HalfFormat::kBf16 ? matmul_half_transposed_kernel<ReadBf16>
                                                    : matmul_half_transposed_kernel<ReadF16>;
  kernel<<<dim3(ceil_div(n, kWarps), row_tiles(m)), 32 * kWarps, 0, stream>>>(
      x, m, k, static_cast<const uint16_t*>(b), n, y);
  return cudaGetLastError();
}

}  // namespace ts::kernels
