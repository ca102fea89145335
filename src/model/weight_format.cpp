#include "model/weight_format.h"

#include <algorithm>
#include <cmath>

#include "model/half_float.h"
#include "util/error.h"

namespace ts {

const char* weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kF16:
      return "f16";
    case WeightFormat::kQ8:
      return "q8";
    case WeightFormat::kQ4:
      return "q4";
    case WeightFormat::kF32:
      break;
  }
  return "f32";
}

namespace {

// `text` as one of the names; q4 only where `q4` (the KV cache takes q8 but
// not q4).
WeightFormat parse_format(const std::string& flag, const std::string& text,
                          const std::string& expected, bool q4) {
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16,
                         WeightFormat::kQ8, WeightFormat::kQ4})
    if (text == weight_format_name(f) && (q4 || f != WeightFormat::kQ4)) return f;
  throw Error(flag + ": expected " + expected + ", got '" + text + "'");
}

}  // namespace

WeightFormat parse_weight_format(const std::string& text) {
  return parse_format("--weights", text, "f32, bf16, f16, q8 or q4", true);
}

WeightFormat parse_kv_format(const std::string& text) {
  return parse_format("--kv", text, "f32, f16, bf16 or q8", false);
}

float round_to_format(float value, WeightFormat format) {
  switch (format) {
    case WeightFormat::kBF16:
      return bf16_to_fp32(fp32_to_bf16(value));
    case WeightFormat::kF16:
      return fp16_to_fp32(fp32_to_fp16(value));
    case WeightFormat::kF32:
    case WeightFormat::kQ8:
    case WeightFormat::kQ4:
      break;
  }
  return value;
}

double bytes_per_value(WeightFormat format) {
  switch (format) {
    case WeightFormat::kQ8:
      return double(sizeof(BlockQ8)) / kQuantBlock;
    case WeightFormat::kQ4:
      return double(sizeof(BlockQ4)) / kQuantBlock;
    default:
      return bytes_per_weight(format);
  }
}

size_t stored_bytes(WeightFormat format, size_t values) {
  switch (format) {
    case WeightFormat::kQ8:
      return (values + kQuantBlock - 1) / kQuantBlock * sizeof(BlockQ8);
    case WeightFormat::kQ4:
      return (values + kQuantBlock - 1) / kQuantBlock * sizeof(BlockQ4);
    default:
      return values * size_t(bytes_per_weight(format));
  }
}

namespace {

// The f16 scale of a block whose largest magnitude is `amax`: amax / top,
// rounded up to an f16 value; false when that is not finite in f16.
bool block_scale(float amax, int top, uint16_t* bits, float* d) {
  const float want = amax / float(top);
  if (!(want <= 65504.0f)) return false;  // NaN, inf, or beyond f16
  uint16_t h = fp32_to_fp16(want);
  if (fp16_to_fp32(h) < want) ++h;  // the next f16 up (want > 0 here)
  if ((h & 0x7C00u) == 0x7C00u) return false;
  *bits = h;
  *d = fp16_to_fp32(h);
  return true;
}

// round-to-nearest(x / d) (halves away from zero), clamped to +-top (never
// reached: d is rounded up); 0 for a zero scale.
int code(float x, float d, int top) {
  if (d == 0.0f) return 0;
  const long q = std::lround(x / d);
  return static_cast<int>(std::clamp<long>(q, -top, top));
}

float block_amax(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  // A NaN is lost by std::max; make it refuse the block.
  for (int j = 0; j < kQuantBlock; ++j)
    if (std::isnan(x[j])) return x[j];
  return amax;
}

// Each block's scale (largest code `top`), then its codes; `put(block, v, d)`
// stores them.
template <class Block, class Put>
bool quantise_blocks(const float* x, size_t n, Block* out, size_t* bad, int top, const Put& put) {
  for (size_t b = 0; b < n / kQuantBlock; ++b) {
    const float* v = x + b * kQuantBlock;
    float d;
    if (!block_scale(block_amax(v), top, &out[b].d, &d)) {
      if (bad) *bad = b;
      return false;
    }
    put(out[b], v, d);
  }
  return true;
}

}  // namespace

bool quantise_q8(const float* x, size_t n, BlockQ8* out, size_t* bad) {
  return quantise_blocks(x, n, out, bad, 127, [](BlockQ8& blk, const float* v, float d) {
    for (int j = 0; j < kQuantBlock; ++j) blk.q[j] = static_cast<int8_t>(code(v[j], d, 127));
  });
}

bool quantise_q4(const float* x, size_t n, BlockQ4* out, size_t* bad) {
  return quantise_blocks(x, n, out, bad, 7, [](BlockQ4& blk, const float* v, float d) {
    constexpr int kHalf = kQuantBlock / 2;
    for (int j = 0; j < kHalf; ++j)
      blk.q[j] =
          static_cast<uint8_t>((code(v[j], d, 7) + 8) | ((code(v[j + kHalf], d, 7) + 8) << 4));
  });
}

float dequantised(const BlockQ8& b, int j) { return fp16_to_fp32(b.d) * float(b.q[j]); }

float dequantised(const BlockQ4& b, int j) {
  const int nibble = j < kQuantBlock / 2 ? b.q[j] & 0xF : b.q[j - kQuantBlock / 2] >> 4;
  return fp16_to_fp32(b.d) * float(nibble - 8);
}

float dequantised_at(const void* blocks, WeightFormat format, size_t i) {
  if (format == WeightFormat::kQ8)
    return dequantised(static_cast<const BlockQ8*>(blocks)[i / kQuantBlock], int(i % kQuantBlock));
  return dequantised(static_cast<const BlockQ4*>(blocks)[i / kQuantBlock], int(i % kQuantBlock));
}

}  // namespace ts
