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
