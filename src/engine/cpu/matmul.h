#pragma once
// fp32 matrix products of the CPU backend. On the GPU they are cuBLAS calls
// (CudaBackend::matmul and matmul_transposed in src/engine/cuda/cuda_backend.cpp).
#include "model/weights.h"
#include "util/thread_pool.h"

namespace ts::cpu {

// Y[M,N] = X[M,K] * W[K,N] (+ bias[N]); W row-major [in, out] (Conv1D).
// Small M (decode: one row per lane) streams W once; large M (prefill) runs
// a packed, register-blocked kernel.
void matmul(const float* x, int m, int k, const float* w, int n, const float* bias, float* y,
            ThreadPool& pool);

// Y[M,N] = X[M,K] * B[N,K]^T: rows of B are dotted with rows of X
// (the tied unembedding: logits = h * wte^T).
void matmul_transposed(const float* x, int m, int k, const float* b, int n, float* y,
                       ThreadPool& pool);

// The same two products with the weights in any WeightFormat: fp32 goes to
// the kernels above; bf16 and f16 weights are read as they are stored, each
// value widened to fp32 in registers (bf16: shifted into the high half of an
// fp32; f16: F16C's vcvtph2ps) and the products summed in fp32, so a decode
// step reads half the bytes and no fp32 copy of the weights is ever made.
// matmul does the same FMAs in the same order as the fp32 kernel on the
// widened values: its results are those of the fp32 matmul on weights rounded
// to the format, bit for bit, on every path (scalar or AVX2, decode or
// prefill; a prefill widens each packed panel as it packs it). For bf16 and
// f16 the AVX2 paths are used where the build has AVX2 (as the
// fp32 kernels'), the scalar loops otherwise; a decode step's one row takes
// an AVX-512 twin where allowed (below), with the same bits. The logits
// (matmul_transposed) stay on AVX2's 8-lane sums for 16-bit weights.
// q8 and q4 weights go to the integer block kernel (matmul_blocks.h): each
// row of X is quantised to q8 blocks of 32 along k and each block's dot
// product is summed in int32 and scaled once, so a decode step reads a
// quarter (q8) or an eighth (q4) of the bytes with less arithmetic per
// weight than fp32. Its results are that kernel's definition, bit for bit on
// every path, row count and thread split; they differ from the fp32 product
// on the dequantised weights by the activations' rounding (bounded there).
// For it matmul's W is stored transposed, [n, k] in blocks along k
// (convert_weights), and k must be a multiple of 32 (else ts::Error).
void matmul(const float* x, int m, int k, MatrixView w, int n, const float* bias, float* y,
            ThreadPool& pool);
void matmul_transposed(const float* x, int m, int k, MatrixView b, int n, float* y,
                       ThreadPool& pool);
// Keeps the bf16 / f16 / q8 / q4 kernels to their scalar loops (tests compare the two
// paths); false (the default) uses AVX2 again where built. Process-wide.
void force_scalar_half(bool on);
// "avx2" or "scalar": the bf16 / f16 / q8 / q4 kernels in use.
const char* half_kernel();

// Where the CPU has AVX-512F (checked at run time; the build targets AVX2)
// two kernels read their weights with 512-bit vectors. The skinny matmul
// (1-8 rows: decode steps; for bf16 / f16 weights one row) does the same
// FMAs per column in the same order, so it gives the AVX2 kernel's bits. matmul_transposed (k a
// multiple of 16) sums each dot product in 16 lanes instead of 8: its logits differ from an AVX2
// machine's in the last bits, and still agree bit for bit between a decode step and a prefill.
// allow_avx512(false) keeps both to AVX2 (tests run both, benchmarks time both); allow_avx512(true)
// uses AVX-512 again where available. Process-wide.
bool avx512_available();
bool avx512_in_use();
void allow_avx512(bool allowed);
// "avx512", "avx2" or "scalar" (a build without AVX2): the skinny kernel in use.
const char* decode_kernel();

// TF32 emulation, for the tests that derive the CUDA backend's TF32
// tolerance: while on, both inputs of every matmul and matmul_transposed are
// rounded to TF32 (10 mantissa bits, to nearest, ties to even) before the
// fp32 product, as tensor cores read them. Process-wide; off by default.
float round_to_tf32(float v);
void emulate_tf32(bool on);
bool tf32_emulated();

// Plain triple loops in double precision: the reference the fast paths are
// tested against.
void matmul_reference(const float* x, int m, int k, const float* w, int n, const float* bias,
                      float* y);

}  // namespace ts::cpu
