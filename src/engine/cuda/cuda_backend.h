#pragma once
// The CUDA backend: kernels/ plus cuBLAS behind the Backend interface. No
// CUDA type appears here, so anything may include it (the factory does when
// the build has CUDA).
#include <memory>
#include <string>

#include "engine/backend.h"
#include "model/weights.h"

namespace ts {

// True when a CUDA device answers and this build's kernels run on it;
// otherwise false and *why says, in one line, what is missing
// (no driver, no device, wrong architecture).
bool cuda_device_available(std::string* why);

// The backend on device 0 with the weights uploaded once. Returns nullptr and
// a one-line reason when there is no usable device or the weights do not fit.
// Environment: TOKENSCOPE_CUDA_TF32=1 lets cuBLAS use TF32 tensor cores (fp32
// accumulation); TOKENSCOPE_CUDA_GRAPHS=0 turns the decode CUDA graphs off;
// TOKENSCOPE_CUDA_SYNC=1 synchronises after every kernel and cuBLAS call (and
// turns graphs off), so that an asynchronous fault names the kernel that
// caused it instead of the forward pass.
std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const ModelWeights> weights,
                                           std::string* why_not);

// Measures the current device's roofs: the FLOP/s of a large cuBLAS GEMM in
// the math the backend's matmuls use (fp32, or TF32 tensor cores with `tf32`,
// whose roof is several times higher: a TF32 prefill measured against the
// fp32 roof would show more than 100 %), and the bandwidth of a
// device-to-device copy (bytes read + written per second). Returns the label
// shown with them; throws ts::Error on a CUDA failure.
std::string measure_cuda_roofs(double* peak_flops, double* bandwidth, bool tf32 = false);

}  // namespace ts
