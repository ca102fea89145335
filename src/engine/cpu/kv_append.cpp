#include "engine/cpu/kv_append.h"

#include <cstdint>
#include <cstring>

#include "model/half_float.h"
#include "util/error.h"

namespace ts::cpu {
namespace {

void encode_row(const float* src, int c, WeightFormat format, void* dst) {
  if (format == WeightFormat::kQ8) {
    // Blocks of 32 along the row: with head_dim a multiple of 32 (checked
    // when the cache is set up) no block straddles two heads.
    if (!quantise_q8(src, size_t(c), static_cast<BlockQ8*>(dst)))
      throw Error("--kv q8: a key or value is beyond an f16 scale's range (or not finite)");
    return;
  }
  uint16_t* out = static_cast<uint16_t*>(dst);
  if (format == WeightFormat::kBF16) {
    for (int i = 0; i < c; ++i) out[i] = fp32_to_bf16(src[i]);
  } else {
    for (int i = 0; i < c; ++i) out[i] = fp32_to_fp16(src[i]);
  }
}

}  // namespace

void kv_append(const float* qkv, const int* slots, int rows, int c, WeightFormat format,
               void* k_pool, void* v_pool) {
  kv_append(qkv, slots, rows, c, c, format, k_pool, v_pool);
}

void kv_append(const float* qkv, const int* slots, int rows, int q_dim, int kv_dim,
               WeightFormat format, void* k_pool, void* v_pool) {
  const size_t row_bytes = stored_bytes(format, size_t(kv_dim));
  const long long ld = q_dim + 2ll * kv_dim;
  for (long long r = 0; r < rows; ++r) {
    const float* k_src = qkv + r * ld + q_dim;
    const float* v_src = k_src + kv_dim;
    char* k = static_cast<char*>(k_pool) + size_t(slots[r]) * row_bytes;
    char* v = static_cast<char*>(v_pool) + size_t(slots[r]) * row_bytes;
    if (format == WeightFormat::kF32) {
      std::memcpy(k, k_src, row_bytes);
      std::memcpy(v, v_src, row_bytes);
    } else {
      encode_row(k_src, kv_dim, format, k);
      encode_row(v_src, kv_dim, format, v);
    }
  }
}

}  // namespace ts::cpu
