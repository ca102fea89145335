// The step's device buffers and the decode CUDA graphs captured against them
// (members of CudaBackend, declared in cuda_backend_impl.h).
//
// Buffers: activations and the results buffer only grow; any growth frees
// every graph first and bumps the generation, since a graph replays the
// addresses it was captured with. What a step returns lies in one device
// buffer, [logits | residuals | probabilities] (ResultsLayout), copied back
// into the pinned staging buffer that also carries the metadata up.
//
// Decode (every entry has one new token) is replayed from a CUDA graph
// captured per (lanes, context bucket, traced layers, residuals): the varying
// data (tokens, slots, block tables, contexts) is read from device metadata
// at fixed addresses, and the context bucket sizes the attention's shared
// memory and the probability rows. A key is run eagerly the first time (cuBLAS
// and lazy module loading warm up outside capture), captured the second time.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>

#include "engine/cuda/cuda_backend_impl.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/forward_plan.h"
#include "util/error.h"

namespace ts::cuda_detail {
namespace {

// Attention probabilities larger than this are copied straight into the
// caller's vectors instead of through the pinned staging buffer (a traced
// 1,024-token prefill of GPT-2 124M returns ~600 MB of them; pinning that
// much host memory costs more than it saves).
constexpr size_t kStagedProbsLimitBytes = size_t(64) << 20;

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

}  // namespace

ResultsLayout CudaBackend::ensure_buffers(const ForwardPlan& plan, int recorded_layers,
                                          bool residuals) {
  const size_t c = cfg_.n_embd, rows = plan.rows;
  ResultsLayout r;
  r.logits = 0;
  r.residuals = align64(static_cast<size_t>(plan.logit_rows) * cfg_.vocab_size);
  r.small_end =
      r.residuals + (residuals ? static_cast<size_t>(cfg_.n_layer + 1) * plan.entries * c : 0);
  r.probs = align64(r.small_end);
  const size_t probs = static_cast<size_t>(plan.probs_per_layer) * recorded_layers;
  r.end = r.probs + probs;
  r.stage_probs = probs * sizeof(float) <= kStagedProbsLimitBytes;

  struct Need {
    DeviceArray<float>* array;
    size_t count;
  };
  // The Llama family's hidden_ holds gate | up, then the SwiGLU output.
  const size_t hidden =
      cfg_.is_gpt2() ? 4 * c : static_cast<size_t>(cfg_.fc_dim()) + cfg_.mlp_dim();
  const Need needs[] = {{&x_, rows * c},
                        {&ln_, rows * c},
                        {&attn_, rows * cfg_.q_dim()},
                        {&proj_, rows * c},
                        {&qkv_, rows * cfg_.qkv_dim()},
                        {&hidden_, rows * hidden},
                        {&final_ln_, static_cast<size_t>(plan.logit_rows) * c},
                        {&results_, r.end}};
  const size_t meta = cuda_detail::metadata_capacity(plan, shape_.block_size, cfg_.n_ctx);
  bool grows = meta > meta_.capacity();
  for (const Need& n : needs) grows |= n.count > n.array->capacity();
  if (grows) {
    // Before anything is freed: no graph may outlive the buffers it was
    // captured with, even when an allocation below fails half-way.
    drop_graphs();
    ++generation_;
    for (const Need& n : needs)
      n.array->reserve(
          n.count, n.array == &results_ ? "the step's results (logits, traces)" : "activations");
    meta_.reserve(meta, "the step metadata");
  }
  logits_.ptr = results_.get() + r.logits;
  resid_.ptr = results_.get() + r.residuals;
  probs_.ptr = results_.get() + r.probs;
  const size_t staged = std::max((r.stage_probs ? r.end : r.small_end) * sizeof(float),
                                 plan.packed.size() * sizeof(int));
  if (cuda_detail::staging_should_shrink(staging_.capacity(), staged)) staging_.release();
  staging_.reserve(staged, "pinned host memory for the step's metadata and results");
  return r;
}

void CudaBackend::drop_graphs() {
  for (auto& [key, g] : graphs_map_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  graphs_map_.clear();
}

void CudaBackend::run_decode_graph(const GraphKey& key, const LaunchShape& s) {
  if (graphs_map_.size() > 256) drop_graphs();  // many distinct keys: start over
  GraphEntry& g = graphs_map_[key];
  if (g.exec && g.generation == generation_) {
    check(cudaGraphLaunch(g.exec, stream_), "cudaGraphLaunch (decode)");
    return;
  }
  if (g.exec) {
    cudaGraphExecDestroy(g.exec);
    g.exec = nullptr;
  }
  if (g.seen_generation != generation_) {
    // First time with these buffers: run eagerly (warms cuBLAS up).
    enqueue(s);
    g.seen_generation = generation_;
    return;
  }
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  std::string failure;
  try {
    enqueue(s);
  } catch (const Error& e) {
    failure = e.what();
  }
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (failure.empty() && end != cudaSuccess) failure = cudaGetErrorString(end);
  cudaGraphExec_t exec = nullptr;
  if (failure.empty()) {
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    if (inst != cudaSuccess)
      failure = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(inst);
  }
  if (graph) cudaGraphDestroy(graph);
  if (!failure.empty()) {
    // Capture is an optimisation: turn it off, say why in device_name(), and
    // run this step eagerly.
    cudaGetLastError();
    graphs_ = false;
    graphs_off_reason_ = "capture failed: " + failure;
    drop_graphs();
    enqueue(s);
    return;
  }
  g.exec = exec;
  g.generation = generation_;
  ++graphs_captured_;
  check(cudaGraphLaunch(g.exec, stream_), "cudaGraphLaunch (decode)");
}

}  // namespace ts::cuda_detail
