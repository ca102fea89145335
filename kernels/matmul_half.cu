// Linear layers on 16-bit weights (bf16 or f16) with fp32 activations and
// fp32 sums: each weight is widened exactly to fp32 as it is read, so the
// products are the CPU's (cpu::matmul and cpu::matmul_transposed on a
// MatrixView in that format) and only the order of the fp32 sums differs.
//
// Every output is summed in an order fixed by k alone: the number of rows in
// the call, and which tile a row lands in, never change a row's bits, so a
// decode step's matmuls equal the same row of a prefill's.
#include <cstdint>

#include "common.cuh"
#include "kernels.cuh"

namespace ts::kernels {
namespace {

constexpr int kWarps = 8;     // warps per block (256 threads)
constexpr int kRows = 8;      // activation rows a block takes at once
constexpr int kColumns = 64;  // matmul_half: output columns per block, two a lane

// y[m][n] = x[m][k] . w[k][n] (w row-major [in, out]). A block takes 64
// columns, two adjacent ones per lane (one 32-bit load when n is even); its
// eight warps split k into eight runs, each summed in order of k, and the
// runs' sums are added in warp order.
template <typename Read>
__global__ void matmul_half_kernel(const float* __restrict__ x, int m, int k,
                                   const uint16_t* __restrict__ w, int n, float* __restrict__ y) {
  const Read widen;
  __shared__ float partial[kWarps][kRows][kColumns];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col0 = blockIdx.x * kColumns;
  const int col = col0 + 2 * lane;
  const int run = (k + kWarps - 1) / kWarps;
  const int k0 = min(k, warp * run), k1 = min(k, k0 + run);
  const bool pairs = (n % 2) == 0;  // w + kk * n + col is then 4-byte aligned
  for (int r0 = blockIdx.y * kRows; r0 < m; r0 += gridDim.y * kRows) {
    const int rows = min(kRows, m - r0);
    float acc[kRows][2];
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = 0.0f;
    if (col < n) {
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
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      partial[warp][r][2 * lane] = acc[r][0];
      partial[warp][r][2 * lane + 1] = acc[r][1];
    }
    __syncthreads();
    for (int o = threadIdx.x; o < kRows * kColumns; o += blockDim.x) {
      const int r = o / kColumns, c = o % kColumns;
      if (r < rows && col0 + c < n) {
        float s = partial[0][r][c];
#pragma unroll
        for (int v = 1; v < kWarps; ++v) s += partial[v][r][c];
        y[static_cast<long long>(r0 + r) * n + col0 + c] = s;
      }
    }
    __syncthreads();  // partial is reused by the next tile of rows
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

// One launch of a kernel's bf16 or f16 instance: `columns` outputs per
// block along x, row tiles along y.
cudaError_t launch(Kernel bf16, Kernel f16, const float* x, int m, int k, const void* w,
                   HalfFormat format, int n, int columns, float* y, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  const Kernel kernel = format == HalfFormat::kBf16 ? bf16 : f16;
  kernel<<<dim3(ceil_div(n, columns), row_tiles(m)), 32 * kWarps, 0, stream>>>(
      x, m, k, static_cast<const uint16_t*>(w), n, y);
  return cudaGetLastError();
}

}  // namespace

// ---- launch ----
cudaError_t matmul_half(const float* x, int m, int k, const void* w, HalfFormat format, int n,
                        float* y, cudaStream_t stream) {
  return launch(matmul_half_kernel<ReadBf16>, matmul_half_kernel<ReadF16>, x, m, k, w, format, n,
                kColumns, y, stream);
}

cudaError_t matmul_half_transposed(const float* x, int m, int k, const void* b, HalfFormat format,
                                   int n, float* y, cudaStream_t stream) {
  return launch(matmul_half_transposed_kernel<ReadBf16>, matmul_half_transposed_kernel<ReadF16>, x,
                m, k, b, format, n, kWarps, y, stream);
}

}  // namespace ts::kernels
