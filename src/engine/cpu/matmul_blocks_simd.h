// The vector kernel of matmul_blocks.cpp, included once per instruction set
// inside a namespace of its own (TS_BLOCK_ISA): matmul_blocks.cpp builds it
// for AVX2 (vpmaddubsw + vpmaddwd), matmul_blocks_vnni.cpp with -mavxvnni
// (vpdpbusd, one instruction for the same four-product lanes), chosen at run
// time. Both give the same int32 lanes, so the same bits (matmul_blocks.h).
// No include guard: each includer instantiates it under its own namespace.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "engine/cpu/matmul_blocks.h"
#include "engine/cpu/matmul_kernels.h"

namespace ts::cpu::TS_BLOCK_ISA {

// lane l = sum_{t<4} u[4l + t] * s[4l + t]: u unsigned bytes, s signed, each
// pair of products at most 2 * 127 * 127 (no 16-bit saturation).
[[gnu::always_inline]] inline __m256i lanes(__m256i u, __m256i s) {
#ifdef __AVXVNNI__
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// A q8 block's p_bl: |x| times w with x's sign.
[[gnu::always_inline]] inline __m256i block_lanes(const BlockQ8& b, __m256i xq, __m256i ax,
                                                  __m256i /*eight_x*/) {
  const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q));
  return lanes(ax, _mm256_sign_epi8(w, xq));
}
// A q4 block's p_bl: the nibbles n (0..15, values 0-15 low, 16-31 high) are
// unsigned as they are, and sum x (n - 8) = sum x n - 8 sum x, the second
// term computed once per block of x (eight_x).
[[gnu::always_inline]] inline __m256i block_lanes(const BlockQ4& b, __m256i xq, __m256i /*ax*/,
                                                  __m256i eight_x) {
  // The 16 bytes in both halves (a load, no shuffle), the upper half's
  // 32-bit lanes shifted right by 4, then the low nibble of every byte.
  const __m256i v =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.q)));
  const __m256i n = _mm256_and_si256(
      _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F));
  return _mm256_sub_epi32(lanes(n, xq), eight_x);
}

// Outputs out[0..T) of one row of x against T rows of B (w, each `stride`
// blocks), one block of each per step; scale[h] is f16 h as fp32. Each
// block is prefetched from 8 rows further on (two steps of four ahead),
// which took a decode step's block reads from about half the read bound to
// about all of it (docs/performance.md).
template <int T, class Block>
[[gnu::always_inline]] inline void dot(const ActivationBlock* x, const Block* w, size_t stride,
                                       int nb, const float* scale, float* out) {
  __m256 acc[T];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].q));
    const __m256i ax = _mm256_abs_epi8(xq);
    const __m256i eight_x = lanes(_mm256_set1_epi8(8), xq);
    const __m256 dx = _mm256_set1_ps(x[b].d);
    for (int t = 0; t < T; ++t) {
      const Block& wb = w[t * stride + b];
      // As an integer: the address may lie past the matrix (a prefetch never faults).
      _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(&wb) +
                                                 8 * stride * sizeof(Block)),
                   _MM_HINT_T0);
      const __m256 p = _mm256_cvtepi32_ps(block_lanes(wb, xq, ax, eight_x));
      // dx * dw in every lane (the scale broadcast straight from the table).
      const __m256 d = _mm256_mul_ps(dx, _mm256_broadcast_ss(scale + wb.d));
      acc[t] = _mm256_fmadd_ps(d, p, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t] = detail::horizontal_sum(acc[t]);
}

// y[j0..j1) of one row (x: its nb blocks; B's rows from w).
template <class Block>
void outputs(const ActivationBlock* x, int nb, const Block* w, int j0, int j1, const float* scale,
             float* y) {
  const size_t stride = static_cast<size_t>(nb);
  int j = j0;
  for (; j + 4 <= j1; j += 4) dot<4>(x, w + j * stride, stride, nb, scale, y + j);
  for (; j < j1; ++j) dot<1>(x, w + j * stride, stride, nb, scale, y + j);
}

}  // namespace ts::cpu::TS_BLOCK_ISA
