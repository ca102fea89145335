#pragma once
// What the two CPU matrix products (matmul.cpp, matmul_transposed.cpp) share:
// the instruction sets the build has, how a weight's values are read as
// fp32 (as stored, 16-bit widened in registers, or q8 / q4 blocks scaled in
// registers), and the state the
// process-wide switches in matmul.h keep. Internal to those two files.
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "model/half_float.h"
#include "model/weight_format.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TS_HAVE_AVX2 1
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The build targets AVX2 (x86-64-v3); the skinny kernel also has an
// AVX-512F twin, compiled for that target alone and chosen at run time.
#define TS_HAVE_AVX512_TWIN 1
#endif
#endif

namespace ts::cpu::detail {

// ---- how W's values are read, as fp32: one (at) or eight (load8) at a time ----
// Ptr addresses value i of the matrix as a flat row-major array: a plain
// pointer, or (block formats) the blocks and an index.
struct F32Reader {
  using T = float;
  using Ptr = const float*;
  static float at(const float* p) { return *p; }
#ifdef TS_HAVE_AVX2
  [[gnu::always_inline]] static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
#endif
};

// 16-bit W, each value widened to fp32 in registers (exactly).
template <WeightFormat F>
struct Half {
  using T = uint16_t;
  using Ptr = const uint16_t*;
  static float at(const uint16_t* p) {
    if constexpr (F == WeightFormat::kBF16)
      return bf16_to_fp32(*p);
    else
      return fp16_to_fp32(*p);
  }
#ifdef TS_HAVE_AVX2
  // bf16 is the high half of an fp32: zero-extend and shift; f16 goes
  // through F16C (x86-64-v3 has it).
  [[gnu::always_inline]] static __m256 load8(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (F == WeightFormat::kBF16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
#ifdef __F16C__
      return _mm256_cvtph_ps(h);
#else
      alignas(32) float v[8];
      for (int i = 0; i < 8; ++i) v[i] = at(p + i);
      return _mm256_load_ps(v);
#endif
    }
  }
#endif
};

// q8 / q4 W (weight_format.h), each value d * q computed in registers (exact
// in fp32, so the sums are those of the fp32 kernels on the dequantised
// weights). Value i lies in block i / 32 at i % 32: every stored row is a
// whole number of blocks. load8 reads eight values of one block: i a
// multiple of 8 (the kernels' vector columns start at multiples of 8 within
// a row whose length is a multiple of 32).
template <WeightFormat F>
struct Quant {
  using Block = std::conditional_t<F == WeightFormat::kQ8, BlockQ8, BlockQ4>;
  using T = Block;
  struct Ptr {
    const Block* blocks;
    size_t i;
    Ptr operator+(size_t d) const { return {blocks, i + d}; }
  };
  static float at(Ptr p) {
    return dequantised(p.blocks[p.i / kQuantBlock], int(p.i % kQuantBlock));
  }
#ifdef TS_HAVE_AVX2
  [[gnu::always_inline]] static __m256 load8(Ptr p) {
    const Block& b = p.blocks[p.i / kQuantBlock];
    const unsigned j = p.i % kQuantBlock;
#ifdef __F16C__
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(b.d));
#else
    const __m256 d = _mm256_set1_ps(fp16_to_fp32(b.d));
#endif
    if constexpr (F == WeightFormat::kQ8) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.q + j));
      return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
    } else {
      // Values 0-15 are the low nibbles of bytes 0-15, values 16-31 the high.
      __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.q + (j & 15u)));
      if (j >= 16) q = _mm_srli_epi16(q, 4);
      q = _mm_sub_epi8(_mm_and_si128(q, _mm_set1_epi8(0x0F)), _mm_set1_epi8(8));
      return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
    }
  }

  // One row of x (a decode step) against eight rows of W, a whole block of
  // 32 columns at a time from column j (a multiple of 32) while one fits
  // before n1: each row's block scale is broadcast once for its four
  // vectors instead of once per vector. The same values (d * q) and the
  // same FMAs per column in row order as load8's loop, so the same bits.
  // Returns the first column left.
  [[gnu::always_inline]] static int one_row_blocks(const __m256* a, Ptr wk, size_t n, float* y,
                                                   int j, int n1) {
    for (; j + kQuantBlock <= n1; j += kQuantBlock) {
      __m256 acc[4];
      for (int t = 0; t < 4; ++t) acc[t] = _mm256_loadu_ps(y + j + 8 * t);
      for (int g = 0; g < 8; ++g) {
        const Block& b = wk.blocks[(wk.i + g * n + j) / kQuantBlock];
#ifdef __F16C__
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b.d));
#else
        const __m256 d = _mm256_set1_ps(fp16_to_fp32(b.d));
#endif
        for (int t = 0; t < 4; ++t) {
          __m128i q;
          if constexpr (F == WeightFormat::kQ8) {
            q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.q + 8 * t));
          } else {
            q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.q + 8 * (t & 1)));
            if (t >= 2) q = _mm_srli_epi16(q, 4);
            q = _mm_sub_epi8(_mm_and_si128(q, _mm_set1_epi8(0x0F)), _mm_set1_epi8(8));
          }
          const __m256 w = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
          acc[t] = _mm256_fmadd_ps(a[g], w, acc[t]);
        }
      }
      for (int t = 0; t < 4; ++t) _mm256_storeu_ps(y + j + 8 * t, acc[t]);
    }
    return j;
  }
#endif
};

#ifdef TS_HAVE_AVX2
inline float horizontal_sum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_hadd_ps(lo, lo);
  lo = _mm_hadd_ps(lo, lo);
  return _mm_cvtss_f32(lo);
}
#endif

// Both inputs of a product rounded to TF32, as tensor cores read them (the
// TF32 emulation of matmul.h).
std::vector<float> rounded_to_tf32(const float* v, size_t n);
// Whether force_scalar_half(true) keeps the 16-bit kernels to their scalar loops.
bool scalar_half_forced();

}  // namespace ts::cpu::detail
