#pragma once
// Token + position embedding. CPU twin of kernels/embedding.cu (kernels::embed).
//   x[r] = wte[token[r]] + wpe[pos[r]]
// A null wpe (the Llama family, whose positions are RoPE's) adds nothing.
#include "model/weights.h"

namespace ts::cpu {

void embed(const float* wte, const float* wpe, const int* tokens, const int* positions, int rows,
           int c, float* out);
// The same with wte in any format (each row widened to fp32 as it is read).
void embed(MatrixView wte, const float* wpe, const int* tokens, const int* positions, int rows,
           int c, float* out);

}  // namespace ts::cpu
