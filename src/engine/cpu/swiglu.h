#pragma once
// The SwiGLU gate of the Llama family's MLP. Named after the CUDA kernel a
// GPU port would add (kernels::swiglu).
//   out[r][i] = silu(gate[r][i]) * up[r][i],  silu(g) = g / (1 + e^-g)
// with gate | up side by side in each input row ([rows][2 n]: the fused
// gate_proj | up_proj matmul's output).
namespace ts::cpu {

void swiglu(const float* gate_up, int rows, int n, float* out);

}  // namespace ts::cpu
