#pragma once
// The q8 / q4 matrix product of the CPU backend: integer dot products of
// 32-value blocks, the way ggml's Q8_0 and Q4_0 kernels work, instead of
// widening every weight to fp32 (an int8 block costs a quarter of an fp32
// block's bytes but, widened, the same arithmetic per value, which left a
// decode step 3-10x above its read bound).
//
// Y[m, n] = X[m, k] * B[n, k]^T (+ bias[n]), B in q8 or q4 blocks along
// its rows (weight_format.h): the layer matrices are stored transposed for
// it (convert_weights), and wte / lm_head already are [vocab, C].
//
// Each row of X is first quantised to q8 in blocks of 32 along k, like the
// weights but with an fp32 scale: dx = max|x| / 127 (fp32), qx = x / dx
// rounded to nearest even (all zero where max|x| is zero; where max|x| is
// not finite, dx is NaN and every qx is 0, so the block's terms are NaN
// and so is the output, as the fp32 product's would be). Then, for output (r, j), with dw_b
// the weight block's scale (f16, exact in fp32), over blocks b in order:
//   p_bl = sum_{t<4} qx[32b + 4l + t] * qw[32b + 4l + t]  for lanes l = 0..7
//                                                          (exact int32)
//   acc_l = fma(fl(dx_b * dw_b), float(p_bl), acc_l)      (acc_l from 0)
// and y = ((acc_0 + acc_4) + (acc_1 + acc_5)) + ((acc_2 + acc_6) + (acc_3
// + acc_7)), then + bias[j]. That is the definition: the vector kernels
// (below) and the scalar loop compute it bit for bit, and so does every row count (a decode step's
// row equals the same row of a prefill) and every thread split.
//
// Against the fp32 product on the dequantised weights it differs by the
// activations' rounding, |x - dx qx| <= dx / 2 per value: at most
// sum_b (dx_b / 2) sum_i |w_bi| per output, plus fp32 rounding of the sums
// (tests/unit/quant_format_test.cpp derives both bounds and checks them).
#include <cstdint>

#include "model/weight_format.h"
#include "util/thread_pool.h"

namespace ts::cpu {

// A block of 32 activations quantised as above.
struct ActivationBlock {
  float d;
  int8_t q[kQuantBlock];
};

// The vector loop has two builds with the same lanes, so the same bits: AVX2
// (vpmaddubsw + vpmaddwd) and AVX-VNNI (vpdpbusd), the second used where the
// CPU has it (checked at run time). allow_avxvnni(false) keeps to AVX2 (tests
// run both); block_kernel names the one in use: "avxvnni", "avx2" or
// "scalar" (simd false, or a build without AVX2). Process-wide.
bool avxvnni_available();
void allow_avxvnni(bool allowed);
const char* block_kernel(bool simd);

// x[0..k) (k a multiple of 32) into k / 32 blocks.
void quantise_activations(const float* x, int k, ActivationBlock* out);

// Y = X B^T (+ bias), B (format q8 or q4) n rows of k / 32 blocks; k must be
// a multiple of 32 (else ts::Error). simd = false keeps to the scalar loop.
void block_matmul(const float* x, int m, int k, const void* b, WeightFormat format, int n,
                  const float* bias, float* y, ThreadPool& pool, bool simd);

}  // namespace ts::cpu
