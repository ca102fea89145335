#pragma once
// The number format of the matmul weights (attention qkv and proj, MLP fc and
// proj, and wte, which is also the tied lm_head), chosen when a model is
// loaded (--weights). The KV cache's values take the three float formats or
// q8 (--kv, KvCacheShape::format). Biases, layer norms and wpe stay fp32
// whatever it is. A 16-bit format halves the bytes a decode step reads, q8
// and q4 cut them to about a quarter and an eighth; the CPU kernels read each
// format directly (engine/cpu/matmul.h): the float formats widened and
// accumulated in fp32, q8 and q4 in integer block dot products.
//
// The two block formats cut every stored row of a matrix into blocks of 32
// consecutive values, each with its own scale d. A row of wte (and lm_head)
// is one token's embedding; a layer matrix W [in, out] is stored transposed,
// [out, in], so a row is one output's weights over the inputs and the
// kernel's dot products run along whole blocks (engine/cpu/matmul_blocks.h):
//   q8 (BlockQ8, 34 bytes): d = max|x| / 127; q = round-to-nearest(x / d),
//      stored as int8 in -127..127; a value reads back as d * q.
//   q4 (BlockQ4, 18 bytes): d = max|x| / 7; q = round-to-nearest(x / d) in
//      -7..7, stored as q + 8 in a nibble (0 is never written); byte j holds
//      value j in its low nibble and value j + 16 in its high one. Symmetric
//      -7..7 rather than ggml's Q4_0 (d = the signed extreme / -8, codes
//      -8..7): one level fewer, but no value is ever clamped, so every value
//      is within d/2 of its original, the same bound as q8's.
// d is stored as an IEEE f16, rounded up (never down) from max|x| / 127 (or
// / 7): then |x| / d never exceeds the top code, nothing is clamped, and a
// block of zeros gets d = 0. A block whose d is beyond f16's range
// (max|x| above about 8.3e6 for q8, 4.6e5 for q4) is refused at load. The
// product d * q is exact in fp32 (11 + 8 significant bits), so "the
// dequantised weight" is one well-defined fp32 value.
// A row whose length is not a multiple of 32 is refused at load, in one line
// naming the tensor (every GPT-2 matrix has whole blocks; a Llama whose
// MLP width is not a multiple of 32 has not).
#include <cstddef>
#include <cstdint>
#include <string>

namespace ts {

enum class WeightFormat { kF32, kBF16, kF16, kQ8, kQ4 };

// "f32", "bf16", "f16", "q8", "q4".
const char* weight_format_name(WeightFormat format);

// The name above back to its format; throws ts::Error in one line for any
// other text: "--weights: expected f32, bf16, f16, q8 or q4, got 'x'".
WeightFormat parse_weight_format(const std::string& text);

// The KV cache's format (--kv) takes the three float names and q8; any other
// text is refused in one line: "--kv: expected f32, f16, bf16 or q8, got 'x'".
WeightFormat parse_kv_format(const std::string& text);

// Bytes of one value of a float format (f32 4, bf16 / f16 2). The block
// formats have no whole number: see bytes_per_value and stored_bytes.
inline int bytes_per_weight(WeightFormat format) { return format == WeightFormat::kF32 ? 4 : 2; }

constexpr int kQuantBlock = 32;  // values per q8 / q4 block

struct BlockQ8 {
  uint16_t d;             // the scale, f16 bits
  int8_t q[kQuantBlock];  // -127..127
};
struct BlockQ4 {
  uint16_t d;  // the scale, f16 bits
  uint8_t
      q[kQuantBlock / 2];  // value j: low nibble of q[j % 16] (j < 16) or high (j >= 16), minus 8
};
static_assert(sizeof(BlockQ8) == 34 && alignof(BlockQ8) == 2);
static_assert(sizeof(BlockQ4) == 18 && alignof(BlockQ4) == 2);

inline bool is_block_format(WeightFormat f) {
  return f == WeightFormat::kQ8 || f == WeightFormat::kQ4;
}

// Bytes per stored value, scales included: 4, 2, 2, 34/32, 18/32.
double bytes_per_value(WeightFormat format);
// Bytes of `values` values stored in `format` (a whole number of blocks for
// q8 / q4: `values` a multiple of 32).
size_t stored_bytes(WeightFormat format, size_t values);

// x[0..n) (n a multiple of 32) into n / 32 blocks as above. Returns false,
// writing nothing further, at the first block whose scale is beyond f16's
// range (or holds a NaN or an infinity); *bad is then that block's index.
bool quantise_q8(const float* x, size_t n, BlockQ8* out, size_t* bad = nullptr);
bool quantise_q4(const float* x, size_t n, BlockQ4* out, size_t* bad = nullptr);
// Value j (0..31) of a block as fp32: d * q, exact.
float dequantised(const BlockQ8& b, int j);
float dequantised(const BlockQ4& b, int j);
// Element i of a run of blocks of `format` (q8 or q4) starting at `blocks`.
float dequantised_at(const void* blocks, WeightFormat format, size_t i);

// A value as a float `format` holds it: rounded to nearest even (and decoded
// back). The block formats round per block (quantise_q8 / _q4), not per value:
// for them the value is returned as it is.
float round_to_format(float value, WeightFormat format);

}  // namespace ts
