#pragma once
// IEEE binary16 (F16) and bfloat16 (BF16) <-> fp32, bit exact.
// Decoding is exact (every half value is an fp32 value); encoding rounds to
// nearest, ties to even, and keeps NaN a NaN. Bulk converters read the 16-bit
// source through memcpy, so the source needs no alignment.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ts {

inline float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

inline float bf16_to_fp32(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }

// Branch-free, so the bulk loop below vectorises; exact for every input.
inline float fp16_to_fp32(uint16_t h) {
  const uint32_t em = uint32_t(h & 0x7FFFu) << 13;  // exponent + mantissa at fp32 positions
  const uint32_t exp = em & 0x0F800000u;            // the half's 5 exponent bits
  uint32_t bits = em + 0x38000000u;                 // rebias the exponent: 15 -> 127
  bits += 0x38000000u & (0u - uint32_t(exp == 0x0F800000u));  // inf / nan: exponent 255
  // Subnormal (or zero): mantissa * 2^-24, exact in fp32. Computed always, selected by mask.
  const float sub = static_cast<float>(static_cast<int32_t>(h & 0x3FFu)) * 5.9604644775390625e-8f;
  const uint32_t is_sub = 0u - uint32_t(exp == 0);
  bits = (bits & ~is_sub) | (float_to_bits(sub) & is_sub);
  return bits_to_float(bits | (uint32_t(h & 0x8000u) << 16));
}

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t bits = float_to_bits(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((bits >> 16) | 0x0040u);  // quiet NaN
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return uint16_t((bits + rounding) >> 16);
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t bits = float_to_bits(f);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return uint16_t(sign | 0x7E00u);   // NaN
  if (abs >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // rounds to >= 65520: inf
  if (abs >= 0x38800000u) {                                 // normal half (>= 2^-14)
    const uint32_t rounding = 0xFFFu + ((abs >> 13) & 1u);
    return uint16_t(sign | ((abs - 0x38000000u + rounding) >> 13));
  }
  if (abs < 0x33000000u) return sign;  // < 2^-25: rounds to zero (2^-25 ties to even 0)
  // Subnormal half: value / 2^-24, rounded to nearest even.
  const uint32_t exp = abs >> 23;  // 102 .. 112
  const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - exp;  // 14 .. 24
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return uint16_t(sign | q);
}

inline void convert_f16_to_f32(const void* src, float* dst, size_t n) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = fp16_to_fp32(h);
  }
}

inline void convert_bf16_to_f32(const void* src, float* dst, size_t n) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = bf16_to_fp32(h);
  }
}

}  // namespace ts
