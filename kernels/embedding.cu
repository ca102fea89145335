// Token + position embedding: out[r] = wte[tokens[r]] + wpe[positions[r]]
// (wpe null: no learned positions, the Llama family), wte in fp32 or a
// 16-bit format (each value widened exactly as it is read).
// CPU twin: cpu::embed (src/engine/cpu/embedding.cpp).
#include "common.cuh"
#include "kernels.cuh"

namespace ts::kernels {
namespace {

template <typename Read>
__global__ void embed_kernel(const typename Read::Stored* __restrict__ wte,
                             const float* __restrict__ wpe, const int* __restrict__ tokens,
                             const int* __restrict__ positions, int rows, int c,
                             float* __restrict__ out) {
  const Read read;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= c) return;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {  // rows may exceed grid y's limit
    const long long t = tokens[r], p = positions[r];
    out[static_cast<long long>(r) * c + i] = read(wte[t * c + i]) + (wpe ? wpe[p * c + i] : 0.0f);
  }
}

template <typename Read>
cudaError_t launch(const void* wte, const float* wpe, const int* tokens, const int* positions,
                   int rows, int c, float* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  embed_kernel<Read><<<dim3(ceil_div(c, 256), grid_rows(rows)), 256, 0, stream>>>(
      static_cast<const typename Read::Stored*>(wte), wpe, tokens, positions, rows, c, out);
  return cudaGetLastError();
}

}  // namespace

// ---- launch ----
cudaError_t embed(const float* wte, const float* wpe, const int* tokens, const int* positions,
                  int rows, int c, float* out, cudaStream_t stream) {
  return launch<ReadF32>(wte, wpe, tokens, positions, rows, c, out, stream);
}

cudaError_t embed_half(const void* wte, HalfFormat format, const float* wpe, const int* tokens,
                       const int* positions, int rows, int c, float* out, cudaStream_t stream) {
  return format == HalfFormat::kBf16
             ? launch<ReadBf16>(wte, wpe, tokens, positions, rows, c, out, stream)
             : launch<ReadF16>(wte, wpe, tokens, positions, rows, c, out, stream);
}

}  // namespace ts::kernels
