#include "engine/cpu/gelu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TS_HAVE_AVX2 1
#endif

namespace ts::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
// e^x for x in [-kExpLimit, kExpLimit] stays finite and normal.
constexpr float kExpLimit = 88.0f;
constexpr float kLog2e = 1.44269504088896341f;
// ln 2 split in two: n * kLn2Hi is exact for |n| < 2^9, so r = x - n ln 2
// loses nothing to cancellation.
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
// Minimax polynomial of (e^r - 1 - r) / r^2 on |r| <= ln(2)/2 (Cephes expf).
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

#ifdef TS_HAVE_AVX2
// e^x lane by lane, within about 1 ulp for |x| <= kExpLimit; +inf above
// (so gelu of a huge negative value is -0, as the tanh form gives), e^-88
// below (gelu's 1 + e^x is then exactly 1).
inline __m256 exp8(__m256 in) {
  const __m256 x =
      _mm256_min_ps(_mm256_max_ps(in, _mm256_set1_ps(-kExpLimit)), _mm256_set1_ps(kExpLimit));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n: n + 127 in the exponent field.
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 big = _mm256_cmp_ps(in, _mm256_set1_ps(kExpLimit), _CMP_GT_OQ);
  return _mm256_blendv_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), _mm256_set1_ps(INFINITY), big);
}

inline __m256 gelu8(__m256 v) {
  const __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
  const __m256 u =
      _mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi), _mm256_fmadd_ps(_mm256_set1_ps(kCubic), v3, v));
  const __m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u));
  return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}
#else
// The same steps as exp8 above, one value at a time.
float exp1(float in) {
  if (in > kExpLimit) return INFINITY;
  const float x = std::min(std::max(in, -kExpLimit), kExpLimit);
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(-n, kLn2Hi, x);
  r = std::fma(-n, kLn2Lo, r);
  float p = kP0;
  p = std::fma(p, r, kP1);
  p = std::fma(p, r, kP2);
  p = std::fma(p, r, kP3);
  p = std::fma(p, r, kP4);
  p = std::fma(p, r, kP5);
  const float rr = r * r;
  p = std::fma(p, rr, r + 1.0f);
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale = 0.0f;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

float gelu1(float v) {
  const float v3 = v * v * v;
  const float u = kSqrt2OverPi * std::fma(kCubic, v3, v);
  return v / (1.0f + exp1(-2.0f * u));
}
#endif

}  // namespace

void gelu(float* x, long long n) {
#ifdef TS_HAVE_AVX2
  long long i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, gelu8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    // The last few values go through the same vector code, so a value's
    // result never depends on where a split of the array put it.
    alignas(32) float tail[8] = {};
    std::memcpy(tail, x + i, sizeof(float) * static_cast<size_t>(n - i));
    _mm256_store_ps(tail, gelu8(_mm256_load_ps(tail)));
    std::memcpy(x + i, tail, sizeof(float) * static_cast<size_t>(n - i));
  }
#else
  for (long long i = 0; i < n; ++i) x[i] = gelu1(x[i]);
#endif
}

}  // namespace ts::cpu
