#include "engine/cpu/embedding.h"

#include <cstdint>

#include "model/half_float.h"

namespace ts::cpu {

void embed(const float* wte, const float* wpe, const int* tokens, const int* positions, int rows,
           int c, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* t = wte + static_cast<long long>(tokens[r]) * c;
    float* o = out + static_cast<long long>(r) * c;
    if (wpe == nullptr) {
      for (int i = 0; i < c; ++i) o[i] = t[i];
      continue;
    }
    const float* p = wpe + static_cast<long long>(positions[r]) * c;
    for (int i = 0; i < c; ++i) o[i] = t[i] + p[i];
  }
}

void embed(MatrixView wte, const float* wpe, const int* tokens, const int* positions, int rows,
           int c, float* out) {
  if (wte.format == WeightFormat::kF32)
    return embed(static_cast<const float*>(wte.data), wpe, tokens, positions, rows, c, out);
  if (is_block_format(wte.format)) {
    // q8 / q4: the token's row is c / 32 blocks (c a multiple of 32).
    for (int r = 0; r < rows; ++r) {
      const size_t row = static_cast<size_t>(tokens[r]) * c;
      float* o = out + static_cast<long long>(r) * c;
      for (int i = 0; i < c; ++i) {
        const float p = wpe ? wpe[static_cast<long long>(positions[r]) * c + i] : 0.0f;
        o[i] = dequantised_at(wte.data, wte.format, row + i) + p;
      }
    }
    return;
  }
  const bool bf16 = wte.format == WeightFormat::kBF16;
  for (int r = 0; r < rows; ++r) {
    const uint16_t* t =
        static_cast<const uint16_t*>(wte.data) + static_cast<long long>(tokens[r]) * c;
    float* o = out + static_cast<long long>(r) * c;
    for (int i = 0; i < c; ++i) {
      const float p = wpe ? wpe[static_cast<long long>(positions[r]) * c + i] : 0.0f;
      o[i] = (bf16 ? bf16_to_fp32(t[i]) : fp16_to_fp32(t[i])) + p;
    }
  }
}

}  // namespace ts::cpu
