#pragma once
// The AVX-VNNI build of the block kernel's vector loop (matmul_blocks_vnni.cpp),
// present where the compiler could build it (TS_HAVE_AVXVNNI_BLOCKS, set by
// CMakeLists.txt); run only where the CPU has AVX-VNNI.
#include "engine/cpu/matmul_blocks.h"

namespace ts::cpu {

#ifdef TS_HAVE_AVXVNNI_BLOCKS
void vnni_outputs(const ActivationBlock* x, int nb, const BlockQ8* w, int j0, int j1,
                  const float* scale, float* y);
void vnni_outputs(const ActivationBlock* x, int nb, const BlockQ4* w, int j0, int j1,
                  const float* scale, float* y);
#endif

}  // namespace ts::cpu
