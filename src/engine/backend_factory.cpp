#include "engine/backend_factory.h"

#include "engine/cpu/cpu_backend.h"
#include "util/error.h"
#ifdef TS_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

namespace ts {

BackendSelection make_backend(const std::string& device,
                              std::shared_ptr<const ModelWeights> weights, int cpu_threads) {
  if (device != "auto" && device != "cpu" && device != "cuda")
    throw Error("--device must be auto, cpu or cuda (got '" + device + "')");
  BackendSelection sel;
  // The CUDA backend copies fp32 tensors: 16-bit weights run on the CPU.
  if (weights->format != WeightFormat::kF32) {
    const std::string format = weight_format_name(weights->format);
    if (device == "cuda")
      throw Error("--weights " + format +
                  ": the CUDA backend reads f32 weights only; use --device cpu or --weights f32");
    if (device == "auto")
      sel.notice = "--weights " + format + " runs on the CPU (CUDA reads f32 only)";
    sel.backend = make_cpu_backend(std::move(weights), cpu_threads);
    return sel;
  }
  if (device != "cpu") {
#ifdef TS_HAVE_CUDA
    std::string why;
    sel.backend = make_cuda_backend(weights, &why);
    if (sel.backend) return sel;
    if (device == "cuda") throw Error("CUDA backend unavailable: " + why);
    sel.notice = "no usable CUDA device (" + why + "); running on the CPU";
#else
    if (device == "cuda")
      throw Error("this build has no CUDA backend (configure with the CUDA toolkit)");
    sel.notice = "built without CUDA; running on the CPU";
#endif
  }
  sel.backend = make_cpu_backend(std::move(weights), cpu_threads);
  return sel;
}

}  // namespace ts
