#pragma once
// The CudaBackend class and the types its members share, declared here so
// that its members can be defined in more than one file: cuda_backend.cpp
// (set-up, weights, KV cache, the forward pass and its kernels) and
// cuda_graphs.cpp (the step's buffers and the decode CUDA graphs captured
// against them). Included only by those two; everything else reaches the
// backend through the factory in cuda_backend.h.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/forward_plan.h"
#include "kernels.cuh"
#include "model/weights.h"

namespace ts::cuda_detail {

// Where each result lies in the results buffer (floats; each region starts
// on a 256-byte boundary). The same lanes, bucket, traced layers and
// residual flag give the same layout: a captured graph's addresses stay valid.
struct ResultsLayout {
  size_t logits = 0, residuals = 0, probs = 0;  // offsets
  size_t small_end = 0;                         // end of logits + residuals
  size_t end = 0;                               // end of everything
  bool stage_probs = false;                     // probabilities go through the staging buffer
};

// The four matrices are in the backend's weight format (fp32, bf16 or f16);
// norms and biases are fp32.
struct DeviceLayer {
  const float *ln_1_w, *ln_1_b, *qkv_b, *proj_b, *ln_2_w, *ln_2_b, *fc_b, *mproj_b;
  const void *qkv_w, *proj_w, *fc_w, *mproj_w;
};

// Everything enqueue() needs; identical values enqueue identical work, which is
// what makes a captured graph replayable.
struct LaunchShape {
  int rows = 0, entries = 0, logit_rows = 0, row_list_size = 0, tiles = 0, tile_size = 0;
  int max_context = 0;
  long long probs_per_layer = 0;
  cuda_detail::MetaOffsets at;
  std::vector<int> probs_slot;  // per layer: index of its probability region, -1 = not recorded
  bool residuals = false;
};

struct GraphKey {
  int lanes, bucket;
  std::vector<bool> layers;
  bool residuals;
  bool operator<(const GraphKey& o) const {
    return std::tie(lanes, bucket, layers, residuals) <
           std::tie(o.lanes, o.bucket, o.layers, o.residuals);
  }
};

struct GraphEntry {
  cudaGraphExec_t exec = nullptr;
  long long generation = -1;       // buffers the graph was captured with
  long long seen_generation = -1;  // ran eagerly once with these buffers
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::shared_ptr<const ModelWeights> weights, int device);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  std::string device_name() const override;
  BackendMemory memory() const override;
  int64_t kv_budget_bytes() const override;
  std::string kv_budget_name() const override { return std::string("the GPU's free"); }
  HardwareRoofs measure_roofs(int cpu_threads, double working_set_bytes) const override;
  double measure_bandwidth(int cpu_threads) const override;
  void init_cache(const KvCacheShape& shape) override;
  void copy_blocks(const std::vector<BlockCopy>& copies) override;
  void move_slots(const std::vector<SlotMove>& moves) override;
  template <typename Item, typename Ranges>
  void copy_in_pools(const std::vector<Item>& items, Ranges ranges_of, const char* what);
  void forward(const std::vector<BatchEntry>& batch, const ForwardOptions& options,
               std::vector<EntryOutput>& outputs) override;

 private:
  void setup();
  void release_handles();
  void upload_weights();
  ResultsLayout ensure_buffers(const ForwardPlan& plan, int recorded_layers, bool residuals);
  void enqueue(const LaunchShape& s);
  void forward_gpt2(const LaunchShape& s);
  void forward_llama(const LaunchShape& s);
  void embed(const float* wpe, const LaunchShape& s);
  void matmul(const float* x, int m, int k, const void* w, int n, float* y);
  void matmul_transposed(const float* x, int m, int k, const void* b, int n, float* y);
  kernels::AttentionParams attention_params(const LaunchShape& s) const;
  void attention(int layer, const LaunchShape& s, kernels::AttentionParams& ap);
  void record_residual(int slot, const LaunchShape& s);
  void logits(const LaunchShape& s);
  void run_decode_graph(const GraphKey& key, const LaunchShape& s);
  void drop_graphs();
  float* k_pool(int layer) const { return pools_.get() + (2 * layer) * pool_layer_stride_; }
  float* v_pool(int layer) const { return pools_.get() + (2 * layer + 1) * pool_layer_stride_; }
  const int* meta(int offset) const { return meta_.get() + offset; }

  std::shared_ptr<const ModelWeights> weights_;
  const ModelConfig cfg_;
  int device_ = 0;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasComputeType_t compute_ = CUBLAS_COMPUTE_32F;
  bool tf32_ = false;
  bool graphs_ = true;
  std::string graphs_off_reason_;
  bool sync_ = false;  // TOKENSCOPE_CUDA_SYNC=1: synchronise after every launch
  // Checks a launch; with sync_, also waits for it and names it when it faulted.
  void launched(cudaError_t e, const char* what) {
    check(e, what);
    if (sync_) check(cudaStreamSynchronize(stream_), what);
  }
  void launched(cublasStatus_t e, const char* what) {
    check(e, what);
    if (sync_) check(cudaStreamSynchronize(stream_), what);
  }

  // The weights' one allocation (bytes). wte, lm_head and the layers'
  // matrices are in format_ (kF32, kBF16 or kF16); everything else is fp32.
  DeviceArray<unsigned char> weights_dev_;
  WeightFormat format_ = WeightFormat::kF32;
  const void* wte_ = nullptr;
  const float *wpe_ = nullptr, *ln_f_w_ = nullptr, *ln_f_b_ = nullptr;
  const void* lm_head_ = nullptr;  // the untied unembedding (Llama family); null: wte_
  std::vector<DeviceLayer> layers_;
  DeviceArray<unsigned char> cublas_workspace_;
  // The 16-bit matmuls' split sums for up to kSplitRows rows (a decode step,
  // lanes and beams included); allocated once, so graphs keep its address.
  static constexpr int kSplitRows = 64;
  DeviceArray<float> matmul_workspace_;

  KvCacheShape shape_;
  DeviceArray<float> pools_;
  size_t pool_layer_stride_ = 0;  // floats of one layer's K (or V) pool ([slot][kv_dim])
  long long pool_slots_ = 0;

  // Activations and results (grow only; generation_ changes with any pointer).
  DeviceArray<float> x_, ln_, attn_, proj_, qkv_, hidden_, final_ln_, results_;
  DeviceView<float> logits_, probs_, resid_;  // regions of results_ (ResultsLayout)
  DeviceArray<int> meta_;
  // Pinned: the metadata goes up from it and the results come back into it
  // (stream order keeps the two apart).
  cuda_detail::PinnedBuffer staging_;
  long long generation_ = 0;
  int graphs_captured_ = 0;
  std::map<GraphKey, GraphEntry> graphs_map_;
};

}  // namespace ts::cuda_detail
