// matmul_blocks_simd.h built for AVX-VNNI (this file alone is compiled with
// -mavxvnni, CMakeLists.txt); matmul_blocks.cpp calls it where the CPU has it.
#include "engine/cpu/matmul_blocks_vnni.h"

#ifdef __AVXVNNI__
#define TS_BLOCK_ISA vnni
#include "engine/cpu/matmul_blocks_simd.h"

namespace ts::cpu {

void vnni_outputs(const ActivationBlock* x, int nb, const BlockQ8* w, int j0, int j1,
                  const float* scale, float* y) {
  vnni::outputs(x, nb, w, j0, j1, scale, y);
}
void vnni_outputs(const ActivationBlock* x, int nb, const BlockQ4* w, int j0, int j1,
                  const float* scale, float* y) {
  vnni::outputs(x, nb, w, j0, j1, scale, y);
}

}  // namespace ts::cpu
#endif
