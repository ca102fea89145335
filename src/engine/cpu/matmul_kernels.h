#pragma once
// What the CPU matrix products (matmul.cpp, matmul_transposed.cpp,
// matmul_blocks.cpp) share: the instruction sets the build has, how a
// weight's values are read as fp32 (as stored, or 16-bit widened in
// registers), and the state the process-wide switches in matmul.h keep.
// Internal to those files.
#include <cstddef>
#include <cstdint>
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
