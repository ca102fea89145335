#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_blocks.h"
#include "engine/cpu/matmul_kernels.h"
#include "util/error.h"

// Y = X B^T: each output is the dot product of a row of X and a row of B (the
// logits against the tied unembedding). The kernels read B as stored (fp32,
// bf16 or f16; q8 / q4 B goes to matmul_blocks.h) and sum each dot product
// in a fixed order, so every row of B
// gets the same bits whichever pass or thread computes it.

namespace ts::cpu {
namespace {

using detail::F32Reader;
using detail::Half;
#ifdef TS_HAVE_AVX2
using detail::horizontal_sum;
#endif

#ifdef TS_HAVE_AVX2
// y[j..j+T] = dot(x, b[j..j+T]) for one row x: T rows of b side by side,
// each an 8-lane sum in k order, then summed across lanes. load(p) reads 8
// values of b as fp32 (fp32, bf16 or f16 b; BPtr addresses them).
template <int T, class BPtr, class Load>
[[gnu::always_inline]] inline void transposed_one_row(const float* x, int k, BPtr b, float* y,
                                                      int j, const Load& load) {
  __m256 acc[T];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (int kk = 0; kk < k; kk += 8) {
    // 16-bit b: each 64-byte line of the next T rows, prefetched as the loop
    // reaches its column (docs/performance.md).
    if constexpr (std::is_same_v<BPtr, const uint16_t*>)
      if (kk % 32 == 0)
        for (int t = 0; t < T; ++t)
          _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(
                           b + static_cast<size_t>(j + T + t) * k + kk)),
                       _MM_HINT_T0);
    const __m256 xv = _mm256_loadu_ps(x + kk);
    __m256 bv[T];
    for (int t = 0; t < T; ++t) bv[t] = load(b + static_cast<size_t>(j + t) * k + kk);
    for (int t = 0; t < T; ++t) acc[t] = _mm256_fmadd_ps(xv, bv[t], acc[t]);
  }
  for (int t = 0; t < T; ++t) y[j + t] = horizontal_sum(acc[t]);
}

// Rows [r0, r0 + rows) of x (rows <= 4) against four rows of b from j, with
// the same 8-lane sums as above.
template <class BPtr, class Load>
[[gnu::always_inline]] inline void transposed_four(const float* x, int r0, int rows, int k, BPtr b,
                                                   int n, float* y, int j, const Load& load) {
  __m256 acc[4][4];
  for (auto& row : acc)
    for (auto& a : row) a = _mm256_setzero_ps();
  for (int kk = 0; kk < k; kk += 8) {
    __m256 bv[4];
    for (int t = 0; t < 4; ++t) bv[t] = load(b + static_cast<size_t>(j + t) * k + kk);
    for (int r = 0; r < rows; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + static_cast<size_t>(r0 + r) * k + kk);
      for (int t = 0; t < 4; ++t) acc[r][t] = _mm256_fmadd_ps(xv, bv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < rows; ++r)
    for (int t = 0; t < 4; ++t)
      y[static_cast<size_t>(r0 + r) * n + j + t] = horizontal_sum(acc[r][t]);
}

#endif

#ifdef TS_HAVE_AVX512_TWIN
// The AVX-512 twins of the two kernels below: each dot product is a 16-lane
// sum in k order, then summed across lanes in a fixed order, whichever of
// them computes it (so a decode step's and a prefill's logits still agree
// bit for bit; they differ from the 8-lane AVX2 sums in the last bits). For
// k a multiple of 16. The 16-lane sums bring the one-row logits to the read
// bound, where the AVX2 kernel stays above it (docs/performance.md).
[[gnu::target("avx512f")]] inline float horizontal_sum16(__m512 v) {
  // The two halves by a plain shuffle: GCC 12's cast and extract intrinsics
  // start from an "undefined" vector and warn (-Wmaybe-uninitialized).
  const __m256 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  return horizontal_sum(_mm256_add_ps(lo, hi));
}

template <int T>
[[gnu::target("avx512f")]] inline void transposed_one_row_avx512(const float* x, int k,
                                                                 const float* b, float* y, int j) {
  __m512 acc[T];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int kk = 0; kk < k; kk += 16) {
    const __m512 xv = _mm512_loadu_ps(x + kk);
    for (int t = 0; t < T; ++t)
      acc[t] =
          _mm512_fmadd_ps(xv, _mm512_loadu_ps(b + static_cast<size_t>(j + t) * k + kk), acc[t]);
  }
  for (int t = 0; t < T; ++t) y[j + t] = horizontal_sum16(acc[t]);
}

// Rows [r0, r0 + rows) of x (rows <= 4) against b's rows from j in fours;
// returns the first row of b left.
[[gnu::target("avx512f")]] int transposed_rows_avx512(const float* x, int m, int r0, int rows,
                                                      int k, const float* b, int n, float* y, int j,
                                                      int j1) {
  if (m == 1) {
    for (; j + 8 <= j1; j += 8) transposed_one_row_avx512<8>(x, k, b, y, j);
    for (; j + 4 <= j1; j += 4) transposed_one_row_avx512<4>(x, k, b, y, j);
  }
  for (; j + 4 <= j1; j += 4) {
    __m512 acc[4][4];
    for (auto& row : acc)
      for (auto& a : row) a = _mm512_setzero_ps();
    for (int kk = 0; kk < k; kk += 16) {
      __m512 bv[4];
      for (int t = 0; t < 4; ++t) bv[t] = _mm512_loadu_ps(b + static_cast<size_t>(j + t) * k + kk);
      for (int r = 0; r < rows; ++r) {
        const __m512 xv = _mm512_loadu_ps(x + static_cast<size_t>(r0 + r) * k + kk);
        for (int t = 0; t < 4; ++t) acc[r][t] = _mm512_fmadd_ps(xv, bv[t], acc[r][t]);
      }
    }
    for (int r = 0; r < rows; ++r)
      for (int t = 0; t < 4; ++t)
        y[static_cast<size_t>(r0 + r) * n + j + t] = horizontal_sum16(acc[r][t]);
  }
  return j;
}
#endif

// y[r, j] for j in [j0, j1): dot(x[r], b[j]); four rows of b at a time, or
// eight for a single row of x (a decode step's logits: eight read the
// lm_head faster than four, docs/performance.md).
// Every row j is the same sum in the same order whichever pass computes it,
// and the rows left to the scalar tail are the same as with four.
void transposed_block(const float* x, int m, int k, const float* b, int n, float* y, int j0, int j1,
                      [[maybe_unused]] bool wide) {
  for (int r0 = 0; r0 < m; r0 += 4) {
    const int rows = std::min(4, m - r0);
    int j = j0;
#ifdef TS_HAVE_AVX512_TWIN
    if (wide && k % 16 == 0) j = transposed_rows_avx512(x, m, r0, rows, k, b, n, y, j, j1);
#endif
#ifdef TS_HAVE_AVX2
    if (k % 8 == 0 && m == 1) {
      for (; j + 8 <= j1; j += 8) transposed_one_row<8>(x, k, b, y, j, F32Reader::load8);
      for (; j + 4 <= j1; j += 4) transposed_one_row<4>(x, k, b, y, j, F32Reader::load8);
    }
    if (k % 8 == 0)
      for (; j + 4 <= j1; j += 4) transposed_four(x, r0, rows, k, b, n, y, j, F32Reader::load8);
#endif
    for (; j < j1; ++j) {
      const float* bj = b + static_cast<size_t>(j) * k;
      for (int r = 0; r < rows; ++r) {
        const float* xr = x + static_cast<size_t>(r0 + r) * k;
        float s = 0.0f;
        for (int kk = 0; kk < k; ++kk) s += xr[kk] * bj[kk];
        y[static_cast<size_t>(r0 + r) * n + j] = s;
      }
    }
  }
}

// transposed_block for 16-bit b (R reads it): the AVX2 path's
// sums as above (8 lanes, then across them); the scalar loop sums each dot
// product in k order.
template <class R>
void transposed_block_packed(const float* x, int m, int k, typename R::Ptr b, int n, float* y,
                             int j0, int j1, [[maybe_unused]] bool simd) {
  for (int r0 = 0; r0 < m; r0 += 4) {
    const int rows = std::min(4, m - r0);
    int j = j0;
#ifdef TS_HAVE_AVX2
    if (simd && k % 8 == 0) {
      if (m == 1) {
        for (; j + 8 <= j1; j += 8) transposed_one_row<8>(x, k, b, y, j, R::load8);
        for (; j + 4 <= j1; j += 4) transposed_one_row<4>(x, k, b, y, j, R::load8);
      }
      for (; j + 4 <= j1; j += 4) transposed_four(x, r0, rows, k, b, n, y, j, R::load8);
    }
#endif
    for (; j < j1; ++j) {
      const typename R::Ptr bj = b + static_cast<size_t>(j) * k;
      for (int r = 0; r < rows; ++r) {
        const float* xr = x + static_cast<size_t>(r0 + r) * k;
        float s = 0.0f;
        for (int kk = 0; kk < k; ++kk) s = std::fma(xr[kk], R::at(bj + kk), s);
        y[static_cast<size_t>(r0 + r) * n + j] = s;
      }
    }
  }
}

template <class R>
void matmul_transposed_packed(const float* x, int m, int k, typename R::Ptr b, int n, float* y,
                              ThreadPool& pool) {
  if (m <= 0 || n <= 0) return;
  const bool simd = !detail::scalar_half_forced();
  const int chunk = 256;
  const int tasks = (n + chunk - 1) / chunk;
  pool.parallel_for(tasks, [&](int t) {
    const int j0 = t * chunk;
    transposed_block_packed<R>(x, m, k, b, n, y, j0, std::min(n, j0 + chunk), simd);
  });
}

void matmul_transposed_fp32(const float* x, int m, int k, const float* b, int n, float* y,
                            ThreadPool& pool) {
  if (m <= 0 || n <= 0) return;
  const bool wide = avx512_in_use();
  const int chunk = 256;
  const int tasks = (n + chunk - 1) / chunk;
  pool.parallel_for(tasks, [&](int t) {
    const int j0 = t * chunk;
    transposed_block(x, m, k, b, n, y, j0, std::min(n, j0 + chunk), wide);
  });
}

}  // namespace

void matmul_transposed(const float* x, int m, int k, const float* b, int n, float* y,
                       ThreadPool& pool) {
  if (m > 0 && n > 0 && tf32_emulated()) {
    const auto xr = detail::rounded_to_tf32(x, static_cast<size_t>(m) * k);
    const auto br = detail::rounded_to_tf32(b, static_cast<size_t>(n) * k);
    return matmul_transposed_fp32(xr.data(), m, k, br.data(), n, y, pool);
  }
  matmul_transposed_fp32(x, m, k, b, n, y, pool);
}

void matmul_transposed(const float* x, int m, int k, MatrixView b, int n, float* y,
                       ThreadPool& pool) {
  const auto* half = static_cast<const uint16_t*>(b.data);
  switch (b.format) {
    case WeightFormat::kBF16:
      return matmul_transposed_packed<Half<WeightFormat::kBF16>>(x, m, k, half, n, y, pool);
    case WeightFormat::kF16:
      return matmul_transposed_packed<Half<WeightFormat::kF16>>(x, m, k, half, n, y, pool);
    case WeightFormat::kQ8:
    case WeightFormat::kQ4:
      return block_matmul(x, m, k, b.data, b.format, n, nullptr, y, pool,
                          !detail::scalar_half_forced());
    case WeightFormat::kF32:
      break;
  }
  matmul_transposed(x, m, k, static_cast<const float*>(b.data), n, y, pool);
}

}  // namespace ts::cpu
