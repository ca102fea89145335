#include "engine/cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/cpu/matmul_blocks.h"
#include "engine/cpu/matmul_kernels.h"
#include "model/half_float.h"
#include "util/error.h"

namespace ts::cpu {
namespace {

using detail::F32Reader;
using detail::Half;

// Whether the AVX-512 twins run: avx512_available() until allow_avx512() says otherwise.
std::atomic<bool> g_avx512{avx512_available()};

constexpr int kSkinnyRows = 8;  // up to this many rows: stream W once
constexpr int kMr = 6;          // micro-tile rows
constexpr int kNr = 16;         // micro-tile columns (two 8-float vectors)
// The packed block's shape, chosen by measurement on a GPT-2 124M prefill
// among 128-1024 rows x 32-512 columns: 64 columns or fewer per task did
// best (the figures: docs/performance.md).
constexpr int kKc = 512;  // k-block: rows of a packed panel
constexpr int kNc = 64;   // columns per task (four 16-column panels)

#ifdef TS_HAVE_AVX512_TWIN
// y[j..] += x[0..8] * w[0..8, j..], eight rows of W from column j on in
// 16-column vectors while a whole one fits before n1; returns the first
// column left. Each column gets one FMA per row in row order, as in the
// 8-column loop, so the bits are the same. One thread streams the weights
// faster this way than with 8-column vectors, and two threads come closer to
// the read bound (docs/performance.md).
[[gnu::target("avx512f")]] int one_row_avx512(const float* x, const float* wk, size_t n, float* y,
                                              int j, int n1) {
  __m512 a[8];
  for (int g = 0; g < 8; ++g) a[g] = _mm512_set1_ps(x[g]);
  for (; j + 16 <= n1; j += 16) {
    __m512 acc = _mm512_loadu_ps(y + j);
    for (int g = 0; g < 8; ++g) acc = _mm512_fmadd_ps(a[g], _mm512_loadu_ps(wk + g * n + j), acc);
    _mm512_storeu_ps(y + j, acc);
  }
  return j;
}
#endif

#ifdef TS_HAVE_AVX512_TWIN
// Sixteen 16-bit values of W from p, widened to fp32 exactly.
template <WeightFormat F>
[[gnu::target("avx512f")]] inline __m512 widen16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  // The all-ones masked forms: GCC 12's plain ones start from an
  // "undefined" vector and warn (-Wmaybe-uninitialized).
  constexpr __mmask16 kAll = 0xFFFF;
  if constexpr (F == WeightFormat::kBF16)
    return _mm512_castsi512_ps(
        _mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, h), 16));
  else
    return _mm512_maskz_cvtph_ps(kAll, h);
}

// one_row_avx512 for 16-bit W: sixteen values widened to fp32 in a register
// (bf16 shifted into the high half, f16 by vcvtph2ps), the same FMAs per
// column in row order, so the AVX2 loop's bits. Each 64-byte line of the
// eight rows eight rows further on is prefetched as the loop reaches it
// (with the AVX-512 loop and the logits' prefetching):
// before them a bf16 step took 0.81x the fp32 step's time for half
// its bytes (docs/performance.md).
template <WeightFormat F>
[[gnu::target("avx512f")]] int one_row_avx512_half(const float* x, const uint16_t* wk, size_t n,
                                                   float* y, int j, int n1) {
  __m512 a[8];
  for (int g = 0; g < 8; ++g) a[g] = _mm512_set1_ps(x[g]);
  // 32 columns (a 64-byte line of each row) at a time, then 16.
  for (; j + 32 <= n1; j += 32) {
    for (int g = 0; g < 8; ++g)
      _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(wk + (g + 8) * n + j)),
                   _MM_HINT_T0);
    __m512 acc0 = _mm512_loadu_ps(y + j), acc1 = _mm512_loadu_ps(y + j + 16);
    for (int g = 0; g < 8; ++g) {
      acc0 = _mm512_fmadd_ps(a[g], widen16<F>(wk + g * n + j), acc0);
      acc1 = _mm512_fmadd_ps(a[g], widen16<F>(wk + g * n + j + 16), acc1);
    }
    _mm512_storeu_ps(y + j, acc0);
    _mm512_storeu_ps(y + j + 16, acc1);
  }
  for (; j + 16 <= n1; j += 16) {
    __m512 acc = _mm512_loadu_ps(y + j);
    for (int g = 0; g < 8; ++g) acc = _mm512_fmadd_ps(a[g], widen16<F>(wk + g * n + j), acc);
    _mm512_storeu_ps(y + j, acc);
  }
  return j;
}
#endif

#ifdef TS_HAVE_AVX512_TWIN
// 2-8 rows of x (lanes, beams, a speculative verify pass) in 16-column
// vectors, two ways. Up to three rows: their 8 x R values of x stay in
// registers and each row reads the W vectors straight into its FMAs (from
// L1 after the first row), the one-row kernel's few instructions per byte.
// More rows: the 8 W vectors stay in registers and the rows go in groups of
// up to four, as skinny_rows below. The first is faster for 2 and 3 rows;
// from 4 rows on it ties or loses (docs/performance.md).
template <int R>
[[gnu::target("avx512f")]] inline void rows_x_held(const float* x, int k, int kk, const float* wk,
                                                   size_t n, float* y, int j, int n1) {
  __m512 a[R][8];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < 8; ++g) a[r][g] = _mm512_set1_ps(x[static_cast<size_t>(r) * k + kk + g]);
  for (; j + 16 <= n1; j += 16) {
    for (int r = 0; r < R; ++r) {
      float* yr = y + r * n + j;
      __m512 acc = _mm512_loadu_ps(yr);
      for (int g = 0; g < 8; ++g)
        acc = _mm512_fmadd_ps(a[r][g], _mm512_loadu_ps(wk + g * n + j), acc);
      _mm512_storeu_ps(yr, acc);
    }
  }
}

template <int R>
[[gnu::target("avx512f")]] inline void rows_w_held(const float* x, int r0, int k, int kk,
                                                   const __m512* wv, float* y, size_t n, int j) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_loadu_ps(y + (r0 + r) * n + j);
  for (int g = 0; g < 8; ++g)
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(x[static_cast<size_t>(r0 + r) * k + kk + g]), wv[g],
                               acc[r]);
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + (r0 + r) * n + j, acc[r]);
}

// Returns the first column left (past the last whole 16-column vector).
[[gnu::target("avx512f")]] int several_rows_avx512(const float* x, int m, int k, int kk,
                                                   const float* wk, size_t n, float* y, int j,
                                                   int n1) {
  const int end = j + (n1 - j) / 16 * 16;
  if (m == 2) rows_x_held<2>(x, k, kk, wk, n, y, j, n1);
  if (m == 3) rows_x_held<3>(x, k, kk, wk, n, y, j, n1);
  if (m <= 3) return end;
  for (; j + 16 <= n1; j += 16) {
    __m512 wv[8];
    for (int g = 0; g < 8; ++g) wv[g] = _mm512_loadu_ps(wk + g * n + j);
    int r = 0;
    for (; m - r >= 4 && m - r != 5; r += 4) rows_w_held<4>(x, r, k, kk, wv, y, n, j);
    for (; m - r >= 3 && m - r != 4; r += 3) rows_w_held<3>(x, r, k, kk, wv, y, n, j);
    for (; m - r >= 2; r += 2) rows_w_held<2>(x, r, k, kk, wv, y, n, j);
    if (r < m) rows_w_held<1>(x, r, k, kk, wv, y, n, j);
  }
  return j;
}
#endif

#ifdef TS_HAVE_AVX2
// y[r0..r0+R, j..j+8] += x[r0..r0+R, kk..kk+8] * (the 8 W vectors in wv),
// one FMA per k in k order for each row.
template <int R>
[[gnu::always_inline]] inline void skinny_rows(const float* x, int r0, int k, int kk,
                                               const __m256* wv, float* y, int n, int j) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_loadu_ps(y + static_cast<size_t>(r0 + r) * n + j);
  for (int g = 0; g < 8; ++g)
    for (int r = 0; r < R; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + static_cast<size_t>(r0 + r) * k + kk + g),
                               wv[g], acc[r]);
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(y + static_cast<size_t>(r0 + r) * n + j, acc[r]);
}

// Every row of x applied to the 8 W vectors in wv (columns j..j+8), in
// groups of up to four: independent FMA chains interleaved (a lone row's
// eight dependent FMAs would wait on each other), so 5 rows go as 3 + 2 and
// 4 as one group rather than leaving a row alone.
[[gnu::always_inline]] inline void all_rows(const float* x, int m, int k, int kk, const __m256* wv,
                                            float* y, int n, int j) {
  int r = 0;
  for (; m - r >= 4 && m - r != 5; r += 4) skinny_rows<4>(x, r, k, kk, wv, y, n, j);
  for (; m - r >= 3 && m - r != 4; r += 3) skinny_rows<3>(x, r, k, kk, wv, y, n, j);
  for (; m - r >= 2; r += 2) skinny_rows<2>(x, r, k, kk, wv, y, n, j);
  if (r < m) skinny_rows<1>(x, r, k, kk, wv, y, n, j);
}
#endif

// y[r, n0:n1] = bias[n0:n1] (or 0) for every row r: where a skinny block starts.
void start_columns(int m, int n, const float* bias, float* y, int n0, int n1) {
  for (int r = 0; r < m; ++r) {
    float* yr = y + static_cast<size_t>(r) * n;
    if (bias) {
      std::memcpy(yr + n0, bias + n0, sizeof(float) * (n1 - n0));
    } else {
      std::fill(yr + n0, yr + n1, 0.0f);
    }
  }
}

// ---- skinny path: y[r, n0:n1] = bias + sum_{k0 <= kk < k1} x[r,kk] * w[kk, n0:n1] ----
// Eight rows of W are read together, one 8-column vector of each held in
// registers while every row of x is applied to them: W is read from memory
// once whatever m is, and each y vector is loaded and stored once per 8 FMAs.
// (The FMAs still grow with m, so more rows still take longer, without
// more reads.) Within a row the FMAs run in k order, one per k,
// so the result is bit-identical to the packed path's. R reads W (fp32 or
// 16-bit: the same FMAs on the widened values); wide: the AVX-512 twins (fp32
// only); simd = false keeps to the scalar loops (the 16-bit kernels' tests).
template <class R>
void skinny_block(const float* x, int m, int k, typename R::Ptr w, int n, const float* bias,
                  float* y, int n0, int n1, int k0, int k1, [[maybe_unused]] bool wide,
                  [[maybe_unused]] bool simd) {
  using T = typename R::T;
  start_columns(m, n, bias, y, n0, n1);
  constexpr int kG = 8;  // rows of W per pass
  int kk = k0;
  for (; kk + kG <= k1; kk += kG) {
    const typename R::Ptr wk = w + static_cast<size_t>(kk) * n;
    int j = n0;
#ifdef TS_HAVE_AVX2
    if (simd && m == 1) {
      // One row (a decode step): x's eight values stay in registers and W is
      // read straight into the FMAs.
#ifdef TS_HAVE_AVX512_TWIN
      if constexpr (std::is_same_v<T, float>) {
        if (wide) j = one_row_avx512(x + kk, wk, static_cast<size_t>(n), y, j, n1);
      } else if constexpr (std::is_same_v<R, Half<WeightFormat::kBF16>>) {
        if (wide) j = one_row_avx512_half<WeightFormat::kBF16>(x + kk, wk, size_t(n), y, j, n1);
      } else if constexpr (std::is_same_v<R, Half<WeightFormat::kF16>>) {
        if (wide) j = one_row_avx512_half<WeightFormat::kF16>(x + kk, wk, size_t(n), y, j, n1);
      }
#endif
      __m256 a[kG];
      for (int g = 0; g < kG; ++g) a[g] = _mm256_broadcast_ss(x + kk + g);
      for (; j + 8 <= n1; j += 8) {
        __m256 acc = _mm256_loadu_ps(y + j);
        for (int g = 0; g < kG; ++g)
          acc = _mm256_fmadd_ps(a[g], R::load8(wk + static_cast<size_t>(g) * n + j), acc);
        _mm256_storeu_ps(y + j, acc);
      }
    }
#ifdef TS_HAVE_AVX512_TWIN
    if constexpr (std::is_same_v<T, float>)
      if (wide && m > 1) j = several_rows_avx512(x, m, k, kk, wk, static_cast<size_t>(n), y, j, n1);
#endif
    for (; simd && j + 8 <= n1; j += 8) {
      __m256 wv[kG];
      for (int g = 0; g < kG; ++g) wv[g] = R::load8(wk + static_cast<size_t>(g) * n + j);
      all_rows(x, m, k, kk, wv, y, n, j);
    }
#endif
    // Columns past the last whole vector (all of them without AVX2), a row
    // at a time so y is walked in order.
    for (int r = 0; r < m; ++r) {
      const float* xr = x + static_cast<size_t>(r) * k + kk;
      float* yr = y + static_cast<size_t>(r) * n;
      for (int c = j; c < n1; ++c) {
        float acc = yr[c];
        for (int g = 0; g < kG; ++g)
          acc = std::fma(xr[g], R::at(wk + static_cast<size_t>(g) * n + c), acc);
        yr[c] = acc;
      }
    }
  }
  for (; kk < k1; ++kk) {
    const typename R::Ptr w0 = w + static_cast<size_t>(kk) * n;
    for (int r = 0; r < m; ++r) {
      const float a = x[static_cast<size_t>(r) * k + kk];
      float* yr = y + static_cast<size_t>(r) * n;
      for (int j = n0; j < n1; ++j) yr[j] = std::fma(a, R::at(w0 + j), yr[j]);
    }
  }
}

// ---- packed path ----
// Packs W[k0:k0+kc, n0:n0+nc] into panels of kNr columns: panel p holds
// kc rows of 16 contiguous floats (zero padded past n), 16-bit W widened.
template <class R>
void pack_w(typename R::Ptr w, int n, int k0, int kc, int n0, int nc, float* packed,
            [[maybe_unused]] bool simd) {
  const int panels = (nc + kNr - 1) / kNr;
  for (int p = 0; p < panels; ++p) {
    const int c0 = n0 + p * kNr;
    const int cols = std::min(kNr, n0 + nc - c0);
    float* dst = packed + static_cast<size_t>(p) * kc * kNr;
    int kk = 0;
#ifdef TS_HAVE_AVX2
    // A whole panel row is two vector moves (a memcpy call per 64 bytes made
    // prefill measurably slower: docs/performance.md).
    for (; simd && cols == kNr && kk < kc; ++kk) {
      const typename R::Ptr src = w + static_cast<size_t>(k0 + kk) * n + c0;
      float* d = dst + static_cast<size_t>(kk) * kNr;
      _mm256_storeu_ps(d, R::load8(src));
      _mm256_storeu_ps(d + 8, R::load8(src + 8));
    }
#endif
    for (; kk < kc; ++kk) {
      const typename R::Ptr src = w + static_cast<size_t>(k0 + kk) * n + c0;
      float* d = dst + static_cast<size_t>(kk) * kNr;
      for (int c = 0; c < kNr; ++c) d[c] = c < cols ? R::at(src + c) : 0.0f;
    }
  }
}

// acc[kMr][kNr] += sum over kc of x[r, k0+kk] * panel[kk][:], one FMA per k
// in order: the same rounding as the skinny path, so a decode step and a
// prefill give bit-identical results for the same row.
// Always inlined: called out of line (GCC stopped inlining it once packed_block
// had two callers) it ran at half the speed.
[[gnu::always_inline]] inline void micro_kernel(const float* x, int ldx, int rows,
                                                const float* panel, int kc, float* acc) {
#ifdef TS_HAVE_AVX2
  __m256 c[kMr][2];
  for (int r = 0; r < kMr; ++r) {
    c[r][0] = _mm256_loadu_ps(acc + r * kNr);
    c[r][1] = _mm256_loadu_ps(acc + r * kNr + 8);
  }
  const float* xr[kMr];
  for (int r = 0; r < kMr; ++r) xr[r] = x + static_cast<size_t>(std::min(r, rows - 1)) * ldx;
  for (int kk = 0; kk < kc; ++kk) {
    const __m256 b0 = _mm256_loadu_ps(panel + kk * kNr);
    const __m256 b1 = _mm256_loadu_ps(panel + kk * kNr + 8);
    for (int r = 0; r < kMr; ++r) {
      const __m256 a = _mm256_broadcast_ss(xr[r] + kk);
      c[r][0] = _mm256_fmadd_ps(a, b0, c[r][0]);
      c[r][1] = _mm256_fmadd_ps(a, b1, c[r][1]);
    }
  }
  for (int r = 0; r < kMr; ++r) {
    _mm256_storeu_ps(acc + r * kNr, c[r][0]);
    _mm256_storeu_ps(acc + r * kNr + 8, c[r][1]);
  }
#else
  for (int r = 0; r < kMr; ++r) {
    const float* xr = x + static_cast<size_t>(std::min(r, rows - 1)) * ldx;
    for (int c = 0; c < kNr; ++c) {
      float s = acc[r * kNr + c];
      for (int kk = 0; kk < kc; ++kk) s = std::fma(xr[kk], panel[kk * kNr + c], s);
      acc[r * kNr + c] = s;
    }
  }
#endif
}

// y[m0:m1, n0:n1] = bias (or 0) + sum over [ka, kb) of x * w (R reads W).
template <class R>
void packed_block(const float* x, int m0, int m1, int k, typename R::Ptr w, int n,
                  const float* bias, float* y, int n0, int n1, int ka, int kb,
                  std::vector<float>& packed, bool simd) {
  const int nc = n1 - n0;
  const int panels = (nc + kNr - 1) / kNr;
  packed.resize(static_cast<size_t>(panels) * kKc * kNr);
  alignas(32) float acc[kMr * kNr];
  for (int k0 = ka; k0 < kb; k0 += kKc) {
    const int kc = std::min(kKc, kb - k0);
    pack_w<R>(w, n, k0, kc, n0, nc, packed.data(), simd);
    for (int r0 = m0; r0 < m1; r0 += kMr) {
      const int rows = std::min(kMr, m1 - r0);
      for (int p = 0; p < panels; ++p) {
        const int c0 = n0 + p * kNr;
        const int cols = std::min(kNr, n1 - c0);
        for (int r = 0; r < kMr; ++r) {
          float* ar = acc + r * kNr;
          const float* yr = y + static_cast<size_t>(r0 + std::min(r, rows - 1)) * n + c0;
          for (int c = 0; c < kNr; ++c) {
            if (c >= cols)
              ar[c] = 0.0f;
            else if (k0 > ka)
              ar[c] = yr[c];
            else
              ar[c] = bias ? bias[c0 + c] : 0.0f;
          }
        }
        micro_kernel(x + static_cast<size_t>(r0) * k + k0, k, rows,
                     packed.data() + static_cast<size_t>(p) * kc * kNr, kc, acc);
        for (int r = 0; r < rows; ++r)
          std::memcpy(y + static_cast<size_t>(r0 + r) * n + c0, acc + r * kNr,
                      sizeof(float) * cols);
      }
    }
  }
}

}  // namespace

namespace {

std::atomic<bool> g_tf32{false};
std::atomic<bool> g_scalar_half{false};

void matmul_fp32(const float* x, int m, int k, const float* w, int n, const float* bias, float* y,
                 ThreadPool& pool);

}  // namespace

std::vector<float> detail::rounded_to_tf32(const float* v, size_t n) {
  std::vector<float> r(v, v + n);
  for (float& f : r) f = round_to_tf32(f);
  return r;
}

bool detail::scalar_half_forced() { return g_scalar_half.load(std::memory_order_relaxed); }

float round_to_tf32(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) return v;  // inf, NaN
  u += 0x0fffu + ((u >> 13) & 1u);                 // to nearest, ties to even, at 10 mantissa bits
  u &= ~0x1fffu;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

void emulate_tf32(bool on) { g_tf32.store(on, std::memory_order_relaxed); }
bool tf32_emulated() { return g_tf32.load(std::memory_order_relaxed); }

void matmul(const float* x, int m, int k, const float* w, int n, const float* bias, float* y,
            ThreadPool& pool) {
  if (m > 0 && n > 0 && tf32_emulated()) {
    const auto xr = detail::rounded_to_tf32(x, static_cast<size_t>(m) * k);
    const auto wr = detail::rounded_to_tf32(w, static_cast<size_t>(k) * n);
    return matmul_fp32(xr.data(), m, k, wr.data(), n, bias, y, pool);
  }
  matmul_fp32(x, m, k, w, n, bias, y, pool);
}

namespace {

// The work split of every matmul, whatever W's format (R reads it); wide and
// simd as skinny_block's.
template <class R>
void matmul_driver(const float* x, int m, int k, typename R::Ptr w, int n, const float* bias,
                   float* y, ThreadPool& pool, bool wide, bool simd) {
  if (m <= 0 || n <= 0) return;
  // The inner dimension is cut in two halves (when long enough), summed
  // apart and then added: y = (bias + x[:, :h] W[:h]) + x[:, h:] W[h:]. Both
  // paths below do exactly this, with one FMA per k in order within a half,
  // so a decode step and a prefill still give bit-identical rows, whatever
  // the number of threads or rows.
  const int halves = k >= 256 ? 2 : 1;
  const int h = halves == 2 ? k / 2 : k;
  const size_t out = static_cast<size_t>(m) * n;
  thread_local std::vector<float> second_half;
  if (halves == 2) second_half.resize(out);
  float* const upper = second_half.data();
  const auto add_second_half = [&] {
    if (halves == 1) return;
    for (size_t i = 0; i < out; ++i) y[i] += upper[i];
  };
  if (m <= kSkinnyRows) {
    // Each task takes one half of W's rows and a range of its columns; with
    // two threads, each streams one unbroken half of W, which the hardware
    // prefetchers read fastest (split by columns only, each thread read
    // every row of W in pieces).
    const int col_tasks = std::max(1, (pool.size() + halves - 1) / halves);
    const int chunk = std::max(64, ((n + col_tasks - 1) / col_tasks + 15) / 16 * 16);
    const int cols = (n + chunk - 1) / chunk;
    pool.parallel_for(cols * halves, [&](int t) {
      const int half = t / cols;
      const int n0 = (t % cols) * chunk;
      const int n1 = std::min(n, n0 + chunk);
      if (half == 0)
        skinny_block<R>(x, m, k, w, n, bias, y, n0, n1, 0, h, wide, simd);
      else
        skinny_block<R>(x, m, k, w, n, nullptr, upper, n0, n1, h, k, wide, simd);
    });
    add_second_half();
    return;
  }
  // Tasks tile both columns and rows so small outputs still feed every thread.
  const int col_tasks = (n + kNc - 1) / kNc;
  const int want = 4 * pool.size();
  const int row_tasks_wanted = std::max(1, (want + col_tasks - 1) / col_tasks);
  const int rows_per_task =
      std::max(4 * kMr, ((m + row_tasks_wanted - 1) / row_tasks_wanted + kMr - 1) / kMr * kMr);
  const int row_tasks = (m + rows_per_task - 1) / rows_per_task;
  pool.parallel_for(col_tasks * row_tasks, [&](int t) {
    thread_local std::vector<float> packed;
    const int n0 = (t % col_tasks) * kNc;
    const int m0 = (t / col_tasks) * rows_per_task;
    const int m1 = std::min(m, m0 + rows_per_task);
    packed_block<R>(x, m0, m1, k, w, n, bias, y, n0, std::min(n, n0 + kNc), 0, h, packed, simd);
    if (halves == 2)
      packed_block<R>(x, m0, m1, k, w, n, nullptr, upper, n0, std::min(n, n0 + kNc), h, k, packed,
                      simd);
  });
  add_second_half();
}

void matmul_fp32(const float* x, int m, int k, const float* w, int n, const float* bias, float* y,
                 ThreadPool& pool) {
  matmul_driver<F32Reader>(x, m, k, w, n, bias, y, pool, g_avx512.load(std::memory_order_relaxed),
                           true);
}

template <WeightFormat F>
void matmul_half(const float* x, int m, int k, const uint16_t* w, int n, const float* bias,
                 float* y, ThreadPool& pool) {
  matmul_driver<Half<F>>(x, m, k, w, n, bias, y, pool, g_avx512.load(std::memory_order_relaxed),
                         !g_scalar_half.load(std::memory_order_relaxed));
}

}  // namespace

bool avx512_available() {
#ifdef TS_HAVE_AVX512_TWIN
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return has;
#else
  return false;
#endif
}

void matmul(const float* x, int m, int k, MatrixView w, int n, const float* bias, float* y,
            ThreadPool& pool) {
  const auto* half = static_cast<const uint16_t*>(w.data);
  switch (w.format) {
    case WeightFormat::kBF16:
      return matmul_half<WeightFormat::kBF16>(x, m, k, half, n, bias, y, pool);
    case WeightFormat::kF16:
      return matmul_half<WeightFormat::kF16>(x, m, k, half, n, bias, y, pool);
    case WeightFormat::kQ8:
    case WeightFormat::kQ4:
      // Stored transposed ([out, in], blocks along in): matmul_blocks.h.
      return block_matmul(x, m, k, w.data, w.format, n, bias, y, pool,
                          !g_scalar_half.load(std::memory_order_relaxed));
    case WeightFormat::kF32:
      break;
  }
  matmul(x, m, k, static_cast<const float*>(w.data), n, bias, y, pool);
}

void force_scalar_half(bool on) { g_scalar_half.store(on, std::memory_order_relaxed); }

const char* half_kernel() {
#ifdef TS_HAVE_AVX2
  if (!g_scalar_half.load(std::memory_order_relaxed)) return "avx2";
#endif
  return "scalar";
}

bool avx512_in_use() { return g_avx512.load(std::memory_order_relaxed); }

void allow_avx512(bool allowed) { g_avx512.store(allowed && avx512_available()); }

const char* decode_kernel() {
#ifdef TS_HAVE_AVX2
  return avx512_in_use() ? "avx512" : "avx2";
#else
  return "scalar";
#endif
}

void matmul_reference(const float* x, int m, int k, const float* w, int n, const float* bias,
                      float* y) {
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < n; ++c) {
      double s = bias ? bias[c] : 0.0;
      for (int kk = 0; kk < k; ++kk)
        s += double(x[static_cast<size_t>(r) * k + kk]) * w[static_cast<size_t>(kk) * n + c];
      y[static_cast<size_t>(r) * n + c] = static_cast<float>(s);
    }
  }
}

}  // namespace ts::cpu
