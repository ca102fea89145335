#include "engine/cpu/embedding.h"

namespace ts::cpu {

void embed(const float* wte, const float* wpe, const int* tokens, const int* positions, int rows,
           int c, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* t = wte + static_cast<long long>(tokens[r]) * c;
    const float* p = wpe + static_cast<long long>(positions[r]) * c;
    float* o = out + static_cast<long long>(r) * c;
    for (int i = 0; i < c; ++i) o[i] = t[i] + p[i];
  }
}

}  // namespace ts::cpu
