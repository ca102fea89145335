#include "engine/cpu/kv_append.h"

#include <cstring>

namespace ts::cpu {

void kv_append(const float* qkv, const int* slots, int rows, int c, float* k_pool, float* v_pool) {
  for (long long r = 0; r < rows; ++r) {
    const float* row = qkv + r * 3 * c;
    const long long slot = slots[r];
    std::memcpy(k_pool + slot * c, row + c, sizeof(float) * c);
    std::memcpy(v_pool + slot * c, row + 2 * c, sizeof(float) * c);
  }
}

}  // namespace ts::cpu
