#pragma once
// Rotary position embedding of the queries and keys, in place, in Hugging
// Face's rotate-half layout. Named after the CUDA kernel a GPU port would add
// (kernels::rope). For each head's vector v of head_dim d at position p and
// each i < d/2, with angle a = p * theta^(-2i/d):
//   v[i]       = v[i] cos a - v[i + d/2] sin a
//   v[i + d/2] = v[i + d/2] cos a + v[i] sin a
// The angle is computed in double and its sine and cosine rounded to fp32
// (HF computes them in fp32 from an fp32 inverse frequency: within an ulp or
// two of the angle, the same to ~1e-6 relative at the positions a context holds).
namespace ts::cpu {

// qkv: [rows][ld]; the first n_head heads (q) and the n_kv_head heads after
// them (k) are rotated, v is left alone.
void rope(float* qkv, int ld, const int* positions, int rows, int n_head, int n_kv_head,
          int head_dim, float theta);

}  // namespace ts::cpu
