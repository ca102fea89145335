#include "engine/backend_factory.h"

#include <string>
#include <utility>

#include "engine/cpu/cpu_backend.h"
#include "util/error.h"
#ifdef TS_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

namespace ts {

BackendSelection make_backend(const std::string& device,
                              std::shared_ptr<const ModelWeights> weights, int cpu_threads,
                              WeightFormat kv_format) {
  if (device != "auto" && device != "cpu" && device != "cuda")
    throw Error("--device must be auto, cpu or cuda (got '" + device + "')");
  BackendSelection sel;
  // The CUDA backend reads f32, bf16 or f16 weights and keeps an fp32 KV
  // cache: q8 / q4 weights, or a cache in any other format, run on the CPU.
  // `flag` is e.g. "--kv q8".
  const auto on_cpu_only = [&](const std::string& flag, const std::string& refusal,
                               const std::string& notice, const std::string& f32_flag) {
    if (device == "cuda")
      throw Error(flag + ": the CUDA backend " + refusal + "; use --device cpu or " + f32_flag);
    if (device == "auto") sel.notice = flag + " runs on the CPU (CUDA " + notice + ")";
    sel.backend = make_cpu_backend(std::move(weights), cpu_threads);
    return std::move(sel);
  };
  if (is_block_format(weights->format))
    return on_cpu_only(std::string("--weights ") + weight_format_name(weights->format),
                       "reads f32, bf16 or f16 weights only", "reads f32, bf16 or f16 only",
                       "--weights bf16");
  if (kv_format != WeightFormat::kF32)
    return on_cpu_only(std::string("--kv ") + weight_format_name(kv_format),
                       "keeps its KV cache in f32 only", "keeps an f32 KV cache only", "--kv f32");
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
