#pragma once
// Appends this step's keys and values to a layer's paged pools. CPU twin of
// kernels/kv_append.cu (kernels::bias_kv_append, which also adds the QKV bias
// the CPU matmul has already added).
//   qkv[r] = [q | k | v] (3C values);  K[slot[r]] = k,  V[slot[r]] = v
// The slots (block * block_size + offset) come from the engine's KvCacheManager.
// The pools hold values in `format`: f16 and bf16 are rounded to nearest even;
// q8 quantises each row (kv_dim values, a multiple of 32) into kv_dim / 32
// BlockQ8s (quantise_q8: every value within d/2 of its own), once, here.
// A q8 row whose scale is beyond f16's range, or that holds a NaN or an
// infinity, throws ts::Error in one line (the engine rolls the step back).
#include "model/weight_format.h"

namespace ts::cpu {

void kv_append(const float* qkv, const int* slots, int rows, int c, WeightFormat format,
               void* k_pool, void* v_pool);

// The same for grouped-query attention: qkv rows of q_dim + 2 kv_dim values
// ([q | k | v]), pool rows of kv_dim values.
void kv_append(const float* qkv, const int* slots, int rows, int q_dim, int kv_dim,
               WeightFormat format, void* k_pool, void* v_pool);

}  // namespace ts::cpu
