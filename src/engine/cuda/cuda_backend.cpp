// The CUDA backend: the forward passes of CpuBackend::forward (GPT-2, and
// the Llama family: Llama, Qwen2), step for step (forward_gpt2 and
// forward_llama read line for line alike on both backends), with the element-wise
// and attention work in kernels/ and the matrix products in cuBLAS (fp32
// weights; TF32 tensor cores with TOKENSCOPE_CUDA_TF32=1) or, for bf16 and f16
// weights, in kernels/matmul_half.cu (fp32 activations and sums).
//
// Memory: the weights are uploaded once (one allocation); the K/V pools live
// on the device as [layer][K|V][slot][C]; activations and result buffers only
// grow. One forward = one metadata upload (forward_plan.h) from a pinned
// staging buffer, the kernels, one copy of the results back into that staging
// buffer, one synchronisation; the host then unpacks the results per entry.
//
// This file holds CudaBackend's set-up, weights, KV cache, enqueue() (the
// model's kernels and matmuls) and forward(), plus the factory functions of
// cuda_backend.h. The class is declared in cuda_backend_impl.h; the step's
// buffers, the results layout and the decode CUDA graphs are in
// cuda_graphs.cpp.
#include "engine/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/cuda/cuda_backend_impl.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/forward_plan.h"
#include "kernels.cuh"
#include "util/error.h"

namespace ts::cuda_detail {
namespace {

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 || std::strcmp(v, "false") == 0);
}

}  // namespace

CudaBackend::CudaBackend(std::shared_ptr<const ModelWeights> weights, int device)
    : weights_(std::move(weights)), cfg_(weights_->config), device_(device) {
  try {
    setup();
  } catch (...) {
    release_handles();
    throw;
  }
}

void CudaBackend::setup() {
  format_ = weights_->format;
  if (format_ != WeightFormat::kF32 && format_ != WeightFormat::kBF16 &&
      format_ != WeightFormat::kF16)
    throw Error(std::string("the CUDA backend reads f32, bf16 or f16 weights, not ") +
                weight_format_name(format_));
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaGetDeviceProperties(&prop_, device_), "cudaGetDeviceProperties");
  const int hd = cfg_.head_dim(), kvh = cfg_.kv_heads();
  if (cfg_.n_head <= 0 || hd <= 0 || (cfg_.is_gpt2() && cfg_.n_embd % cfg_.n_head))
    throw Error("the CUDA kernels need n_embd to be a multiple of n_head (model has " +
                std::to_string(cfg_.n_embd) + " / " + std::to_string(cfg_.n_head) + ")");
  if (!cfg_.is_gpt2() && hd % 2 != 0)
    throw Error("the CUDA rope kernel needs an even head_dim (model has " + std::to_string(hd) +
                ")");
  if (kvh <= 0 || cfg_.n_head % kvh != 0 || (cfg_.is_gpt2() && kvh != cfg_.n_head))
    throw Error("the CUDA attention needs n_head to be a multiple of n_kv_head (model has " +
                std::to_string(cfg_.n_head) + " / " + std::to_string(kvh) + ")");
  if (!kernels::attention_row_kernel_fits(cfg_.n_ctx, hd))
    throw Error("the model's context of " + std::to_string(cfg_.n_ctx) +
                " does not fit the attention kernel's shared memory on " + prop_.name);
  tf32_ = env_flag("TOKENSCOPE_CUDA_TF32", false);
  compute_ = tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  graphs_ = env_flag("TOKENSCOPE_CUDA_GRAPHS", true);
  if (!graphs_) graphs_off_reason_ = "TOKENSCOPE_CUDA_GRAPHS=0";
  // Debugging an asynchronous fault: synchronise after every launch so the
  // error names the kernel that failed (no graphs: a capture cannot sync).
  sync_ = env_flag("TOKENSCOPE_CUDA_SYNC", false);
  if (sync_) {
    graphs_ = false;
    graphs_off_reason_ = "TOKENSCOPE_CUDA_SYNC=1";
  }

  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cublasCreate(&cublas_), "cublasCreate");
  check(cublasSetStream(cublas_, stream_), "cublasSetStream");
  // A workspace of our own (set after the stream: setting a stream resets it)
  // keeps cuBLAS from allocating while a CUDA graph is being captured.
  const size_t workspace = size_t(32) << 20;
  cublas_workspace_.reserve(workspace, "the cuBLAS workspace");
  check(cublasSetWorkspace(cublas_, cublas_workspace_.get(), workspace), "cublasSetWorkspace");
  check(cublasSetMathMode(cublas_, tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        "cublasSetMathMode");
  check(kernels::attention_prepare(), "attention kernel setup");
  upload_weights();
}

CudaBackend::~CudaBackend() { release_handles(); }

void CudaBackend::release_handles() {
  cudaSetDevice(device_);
  if (stream_) cudaStreamSynchronize(stream_);
  drop_graphs();
  if (cublas_) cublasDestroy(cublas_);
  cublas_ = nullptr;
  staging_.release();
  if (stream_) cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

std::string CudaBackend::device_name() const {
  std::string s = std::string(prop_.name) + " (sm_" + std::to_string(prop_.major) +
                  std::to_string(prop_.minor) + ", " + std::to_string(prop_.totalGlobalMem >> 30) +
                  " GiB, " +
                  (format_ == WeightFormat::kF32
                       ? std::string(tf32_ ? "TF32" : "fp32") + " matmuls"
                       : std::string(weight_format_name(format_)) + " weights, fp32 sums") +
                  ", decode graphs ";
  if (graphs_)
    s += "on, " + std::to_string(graphs_captured_) + " captured";
  else
    s += "off: " + graphs_off_reason_;
  return s + ")";
}

BackendMemory CudaBackend::memory() const {
  BackendMemory m;
  m.where = std::string(prop_.name) + " memory";
  m.on_host = false;
  m.kv_reserved_bytes = static_cast<int64_t>(pools_.capacity() * sizeof(float));
  m.weight_copy_bytes = static_cast<int64_t>(weights_dev_.capacity());
  size_t scratch = cublas_workspace_.capacity() + meta_.capacity() * sizeof(int) +
                   matmul_workspace_.capacity() * sizeof(float);
  for (const DeviceArray<float>* a :
       {&x_, &ln_, &attn_, &proj_, &qkv_, &hidden_, &final_ln_, &results_})
    scratch += a->capacity() * sizeof(float);
  m.scratch_last_bytes = m.scratch_peak_bytes = static_cast<int64_t>(scratch);
  m.pinned_host_bytes = static_cast<int64_t>(staging_.capacity());
  size_t free = 0, total = 0;
  cudaSetDevice(device_);
  if (cudaMemGetInfo(&free, &total) == cudaSuccess) {
    m.free_bytes = static_cast<int64_t>(free);
    m.total_bytes = static_cast<int64_t>(total);
  } else {
    cudaGetLastError();  // the report says 0 rather than failing
    m.total_bytes = static_cast<int64_t>(prop_.totalGlobalMem);
  }
  return m;
}

// A new KV cache replaces the current one, but is reserved before the old one
// is freed (init_cache): it must fit beside it, in what is free now.
int64_t CudaBackend::kv_budget_bytes() const {
  size_t free = 0, total = 0;
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return static_cast<int64_t>(free);
}

HardwareRoofs CudaBackend::measure_roofs(int, double) const {
  check(cudaSetDevice(device_), "cudaSetDevice");
  HardwareRoofs r;
  r.how = measure_cuda_roofs(&r.peak_flops, &r.bandwidth, tf32_);
  return r;
}

double CudaBackend::measure_bandwidth(int) const {
  double flops = 0, bandwidth = 0;
  check(cudaSetDevice(device_), "cudaSetDevice");
  measure_cuda_roofs(&flops, &bandwidth, tf32_);
  return bandwidth;
}

void CudaBackend::upload_weights() {
  const ModelWeights& w = *weights_;
  const long long c = cfg_.n_embd;
  // One tensor: its host copy, its bytes, where its device address goes
  // (an fp32 tensor's pointer, or a matrix's in the backend's format).
  struct Tensor {
    const void* host;
    size_t bytes;
    const float** f32;
    const void** matrix;
  };
  std::vector<Tensor> tensors;
  layers_.assign(cfg_.n_layer, DeviceLayer{});
  const size_t value = static_cast<size_t>(bytes_per_weight(format_));  // of the matrices
  auto fp32 = [&](const float* host, long long count, const float** dev) {
    tensors.push_back({host, sizeof(float) * static_cast<size_t>(count), dev, nullptr});
  };
  // A matrix in the backend's format: the fp32 tensor, or its 16-bit copy.
  auto matrix = [&](MatrixView view, long long count, const void** dev) {
    tensors.push_back({view.data, value * static_cast<size_t>(count), nullptr, dev});
  };
  // GPT-2's shapes as forward_gpt2 reads them (q = C, fc = m = 4C).
  const bool gpt2 = cfg_.is_gpt2();
  const long long qkv = cfg_.qkv_dim(), q = cfg_.q_dim();
  const long long fc = gpt2 ? 4 * c : cfg_.fc_dim(), m = gpt2 ? 4 * c : cfg_.mlp_dim();
  // The Llama family has no position table and no norm biases (and q/k/v
  // biases only in Qwen2): those tensors are skipped when absent.
  auto optional = [&](const float* host, long long count, const float** dev) {
    if (host || gpt2) fp32(host, count, dev);
  };
  matrix(w.wte_matrix(), static_cast<long long>(cfg_.vocab_size) * c, &wte_);
  optional(w.wpe, static_cast<long long>(cfg_.n_ctx) * c, &wpe_);
  for (int l = 0; l < cfg_.n_layer; ++l) {
    const LayerWeights& lw = w.layers.at(l);
    DeviceLayer& d = layers_[l];
    fp32(lw.ln_1_weight, c, &d.ln_1_w);
    optional(lw.ln_1_bias, c, &d.ln_1_b);
    matrix(w.qkv(lw), c * qkv, &d.qkv_w);
    optional(lw.attn_qkv_bias, qkv, &d.qkv_b);
    matrix(w.attn_proj(lw), q * c, &d.proj_w);
    optional(lw.attn_proj_bias, c, &d.proj_b);
    fp32(lw.ln_2_weight, c, &d.ln_2_w);
    optional(lw.ln_2_bias, c, &d.ln_2_b);
    matrix(w.fc(lw), c * fc, &d.fc_w);
    optional(lw.mlp_fc_bias, fc, &d.fc_b);
    matrix(w.mlp_proj(lw), m * c, &d.mproj_w);
    optional(lw.mlp_proj_bias, c, &d.mproj_b);
  }
  fp32(w.ln_f_weight, c, &ln_f_w_);
  optional(w.ln_f_bias, c, &ln_f_b_);
  if (!cfg_.tied_embeddings)
    matrix(w.unembedding(), static_cast<long long>(cfg_.vocab_size) * c, &lm_head_);
  // Each tensor starts on a 256-byte boundary (vector loads, cuBLAS alignment).
  auto padded = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  size_t total = 0;
  for (const Tensor& t : tensors) total += padded(t.bytes);
  weights_dev_.reserve(total, "the model weights");
  size_t at = 0;
  for (const Tensor& t : tensors) {
    if (!t.host) throw Error("cuda backend: a weight tensor is missing");
    unsigned char* dst = weights_dev_.get() + at;
    check(cudaMemcpy(dst, t.host, t.bytes, cudaMemcpyHostToDevice), "uploading the weights");
    if (t.f32)
      *t.f32 = reinterpret_cast<const float*>(dst);
    else
      *t.matrix = dst;
    at += padded(t.bytes);
  }
  // cudaMemcpy from pageable memory may return before the device has the
  // data, and the forwards run on a non-blocking stream that does not wait
  // for the legacy stream: make the upload complete here.
  check(cudaDeviceSynchronize(), "uploading the weights");
  if (format_ != WeightFormat::kF32) {
    size_t need = 0;
    for (const auto& [in, out] :
         {std::pair{c, qkv}, std::pair{q, c}, std::pair{c, fc}, std::pair{m, c}})
      need = std::max(need, kernels::matmul_half_workspace(kSplitRows, static_cast<int>(in),
                                                           static_cast<int>(out)));
    if (need) matmul_workspace_.reserve(need, "the 16-bit matmuls' workspace");
  }
}

void CudaBackend::init_cache(const KvCacheShape& shape) {
  if (shape.n_layer != cfg_.n_layer || shape.n_head * shape.head_dim != cfg_.kv_dim())
    throw Error("KV cache shape does not match the model");
  if (shape.block_size <= 0 || shape.num_blocks <= 0) throw Error("KV cache shape is empty");
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaStreamSynchronize(stream_), "init_cache");
  const long long slots = static_cast<long long>(shape.num_blocks) * shape.block_size;
  const size_t layer_stride = static_cast<size_t>(slots) * cfg_.kv_dim();
  const size_t floats = layer_stride * 2 * cfg_.n_layer;
  const std::string what = "the KV cache (" + std::to_string(slots) + " tokens x " +
                           std::to_string(cfg_.n_layer) + " layers)";
  // The new pools are reserved before the old ones are freed: a size the
  // device refuses leaves the cache as it was (its contents included).
  cuda_detail::DeviceArray<float> pools;
  pools.reserve(floats, what.c_str());
  check(cudaMemsetAsync(pools.get(), 0, floats * sizeof(float), stream_), "clearing the KV cache");
  check(cudaStreamSynchronize(stream_), "clearing the KV cache");
  drop_graphs();
  ++generation_;
  pools_.swap(pools);
  shape_ = shape;
  pool_slots_ = slots;
  pool_layer_stride_ = layer_stride;
}

// Every copy is checked (by the range functions, which throw) before any is
// queued; they run in order on one stream, so a copy may read what an
// earlier one wrote.
template <typename Item, typename Ranges>
void CudaBackend::copy_in_pools(const std::vector<Item>& items, Ranges ranges_of,
                                const char* what) {
  if (items.empty()) return;
  check(cudaSetDevice(device_), "cudaSetDevice");
  std::vector<cuda_detail::PoolCopy> ranges;
  for (const Item& item : items) {
    const auto r = ranges_of(item, shape_, cfg_.kv_dim());
    ranges.insert(ranges.end(), r.begin(), r.end());
  }
  for (const cuda_detail::PoolCopy& r : ranges)
    check(cudaMemcpyAsync(pools_.get() + r.dst, pools_.get() + r.src, r.count * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream_),
          what);
  if (sync_) check(cudaStreamSynchronize(stream_), what);
}

void CudaBackend::copy_blocks(const std::vector<BlockCopy>& copies) {
  copy_in_pools(copies, cuda_detail::block_copy_ranges, "copying a KV block (copy-on-write)");
}

void CudaBackend::move_slots(const std::vector<SlotMove>& moves) {
  copy_in_pools(moves, cuda_detail::slot_move_ranges, "moving a KV row");
}

void CudaBackend::enqueue(const LaunchShape& s) {
  if (cfg_.is_gpt2())
    forward_gpt2(s);
  else
    forward_llama(s);
  logits(s);  // final norm(x) . lm_head^T (wte^T when tied)
}

// GPT-2, one block per iteration: x += attn(ln_1(x)); x += mlp(ln_2(x)).
// The same steps, in the same order and under the same names, as
// CpuBackend::forward_gpt2 (src/engine/cpu/cpu_backend.cpp). Each residual add is
// fused with the layer norm that reads it (residual_layernorm), so ln_1 of a
// block is computed by the step before it and ln_f by the last block's. A
// bias the CPU matmul adds is added here by the kernel after the product
// (bias_kv_append, residual_layernorm, bias_gelu).
void CudaBackend::forward_gpt2(const LaunchShape& s) {
  const int c = cfg_.n_embd, rows = s.rows;
  const float eps = cfg_.layer_norm_epsilon;
  kernels::AttentionParams ap = attention_params(s);

  embed(wpe_, s);
  if (s.residuals) record_residual(0, s);
  launched(kernels::layernorm(x_.get(), layers_[0].ln_1_w, layers_[0].ln_1_b, rows, c, eps,
                              ln_.get(), stream_),
           "layernorm kernel");  // ln_1 of block 0
  for (int l = 0; l < cfg_.n_layer; ++l) {
    const DeviceLayer& L = layers_[l];
    const bool last = l + 1 == cfg_.n_layer;
    // ln_1 -> qkv -> KV append -> attention -> proj + residual, ln_2
    matmul(ln_.get(), rows, c, L.qkv_w, 3 * c, qkv_.get());
    launched(kernels::bias_kv_append(qkv_.get(), L.qkv_b, meta(s.at.slots), rows, c, c, k_pool(l),
                                     v_pool(l), stream_),
             "KV append kernel");
    attention(l, s, ap);
    matmul(attn_.get(), rows, c, L.proj_w, c, proj_.get());
    launched(kernels::residual_layernorm(x_.get(), proj_.get(), L.proj_b, L.ln_2_w, L.ln_2_b, rows,
                                         c, eps, ln_.get(), stream_),
             "residual + layernorm kernel");
    // fc -> gelu -> proj + residual, then the next block's ln_1 (ln_f after the last)
    matmul(ln_.get(), rows, c, L.fc_w, 4 * c, hidden_.get());
    launched(kernels::bias_gelu(hidden_.get(), L.fc_b, rows, 4 * c, stream_), "gelu kernel");
    matmul(hidden_.get(), rows, 4 * c, L.mproj_w, c, proj_.get());
    launched(kernels::residual_layernorm(
                 x_.get(), proj_.get(), L.mproj_b, last ? ln_f_w_ : layers_[l + 1].ln_1_w,
                 last ? ln_f_b_ : layers_[l + 1].ln_1_b, rows, c, eps, ln_.get(), stream_),
             "residual + layernorm kernel");
    if (s.residuals) record_residual(l + 1, s);
  }
}

// Llama / Qwen2, one block per iteration: x += attn(rms_1(x)); x += mlp(rms_2(x)),
// with RoPE on q and k before the KV append, grouped-query attention and
// mlp = down(silu(gate(h)) * up(h)): the steps and names of
// CpuBackend::forward_llama. Qwen2's q/k/v bias is added by the rope kernel.
void CudaBackend::forward_llama(const LaunchShape& s) {
  const int c = cfg_.n_embd, rows = s.rows, q = cfg_.q_dim(), kv = cfg_.kv_dim();
  const int fc = cfg_.fc_dim(), m = cfg_.mlp_dim();
  const float eps = cfg_.layer_norm_epsilon;
  float* gated = hidden_.get() + static_cast<size_t>(rows) * fc;  // after gate | up
  kernels::AttentionParams ap = attention_params(s);
  embed(nullptr, s);
  if (s.residuals) record_residual(0, s);
  launched(kernels::rmsnorm(x_.get(), layers_[0].ln_1_w, rows, c, eps, ln_.get(), stream_),
           "rmsnorm kernel");
  for (int l = 0; l < cfg_.n_layer; ++l) {
    const DeviceLayer& L = layers_[l];
    const float* next_norm = l + 1 == cfg_.n_layer ? ln_f_w_ : layers_[l + 1].ln_1_w;
    // rms_1 -> q|k|v (+ Qwen2's biases) -> RoPE -> KV append -> attention -> o_proj + residual
    matmul(ln_.get(), rows, c, L.qkv_w, q + 2 * kv, qkv_.get());
    launched(kernels::rope(qkv_.get(), q + 2 * kv, L.qkv_b, meta(s.at.positions), rows, cfg_.n_head,
                           cfg_.kv_heads(), cfg_.head_dim(), cfg_.rope_theta, stream_),
             "rope kernel");
    launched(kernels::bias_kv_append(qkv_.get(), nullptr, meta(s.at.slots), rows, q, kv, k_pool(l),
                                     v_pool(l), stream_),
             "KV append kernel");
    attention(l, s, ap);
    matmul(attn_.get(), rows, q, L.proj_w, c, proj_.get());
    launched(kernels::residual_rmsnorm(x_.get(), proj_.get(), L.ln_2_w, rows, c, eps, ln_.get(),
                                       stream_),
             "residual + rmsnorm kernel");
    // gate|up -> swiglu -> down + residual, then the next block's rms_1 (the final norm after
    // the last)
    matmul(ln_.get(), rows, c, L.fc_w, fc, hidden_.get());
    launched(kernels::swiglu(hidden_.get(), rows, m, gated, stream_), "swiglu kernel");
    matmul(gated, rows, m, L.mproj_w, c, proj_.get());
    launched(kernels::residual_rmsnorm(x_.get(), proj_.get(), next_norm, rows, c, eps, ln_.get(),
                                       stream_),
             "residual + rmsnorm kernel");
    if (s.residuals) record_residual(l + 1, s);
  }
}

// ---- the plumbing of enqueue() ----

namespace {
kernels::HalfFormat half_format(WeightFormat f) {
  return f == WeightFormat::kBF16 ? kernels::HalfFormat::kBf16 : kernels::HalfFormat::kF16;
}
}  // namespace

// x[r] = wte[tokens[r]] (+ wpe[positions[r]]), wte in the weights' format.
void CudaBackend::embed(const float* wpe, const LaunchShape& s) {
  const int c = cfg_.n_embd;
  const int *tokens = meta(s.at.tokens), *positions = meta(s.at.positions);
  if (format_ == WeightFormat::kF32)
    launched(kernels::embed(static_cast<const float*>(wte_), wpe, tokens, positions, s.rows, c,
                            x_.get(), stream_),
             "embedding kernel");
  else
    launched(kernels::embed_half(wte_, half_format(format_), wpe, tokens, positions, s.rows, c,
                                 x_.get(), stream_),
             "embedding kernel (16-bit)");
}

// Y[m,n] = X[m,k] W[k,n], W row-major [in, out] (no bias: the next kernel adds it).
void CudaBackend::matmul(const float* x, int m, int k, const void* w, int n, float* y) {
  if (format_ != WeightFormat::kF32) {
    launched(kernels::matmul_half(x, m, k, w, half_format(format_), n, y, matmul_workspace_.get(),
                                  matmul_workspace_.capacity(), stream_),
             "16-bit linear layer kernel");
    return;
  }
  // Row-major Y[m,n] = X[m,k] W[k,n] is column-major Y^T = W^T X^T.
  const float one = 1.0f, zero = 0.0f;
  launched(cublasGemmEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, w, CUDA_R_32F, n, x,
                        CUDA_R_32F, k, &zero, y, CUDA_R_32F, n, compute_, CUBLAS_GEMM_DEFAULT),
           "cublasGemmEx (linear layer)");
}

// Y[m,n] = X[m,k] B[n,k]^T (the tied unembedding: logits = h wte^T).
void CudaBackend::matmul_transposed(const float* x, int m, int k, const void* b, int n, float* y) {
  if (format_ != WeightFormat::kF32) {
    launched(kernels::matmul_half_transposed(x, m, k, b, half_format(format_), n, y, stream_),
             "16-bit unembedding kernel");
    return;
  }
  // Row-major Y[m,n] = X[m,k] B[n,k]^T is column-major Y^T = B X^T, where the
  // column-major view of row-major B is B^T (k x n, leading dimension k).
  const float one = 1.0f, zero = 0.0f;
  launched(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_32F, k, x,
                        CUDA_R_32F, k, &zero, y, CUDA_R_32F, n, compute_, CUBLAS_GEMM_DEFAULT),
           "cublasGemmEx (unembedding)");
}

// The attention kernels' view of the batch: every per-row and per-entry value
// is read from the step's device metadata (so a graph replays with new data).
kernels::AttentionParams CudaBackend::attention_params(const LaunchShape& s) const {
  const auto& at = s.at;
  kernels::AttentionParams ap;
  ap.qkv = qkv_.get();
  ap.out = attn_.get();
  ap.row_entry = meta(at.row_entry);
  ap.row_local = meta(at.row_local);
  ap.row_key = meta(at.row_key);
  ap.row_mask = meta(at.row_mask);
  ap.masks = meta(at.masks);
  ap.entry_context = meta(at.entry_context);
  ap.entry_rows = meta(at.entry_rows);
  ap.entry_bt_offset = meta(at.entry_bt_offset);
  ap.entry_probs_offset = meta(at.entry_probs_offset);
  ap.entry_probs_stride = meta(at.entry_probs_stride);
  ap.block_tables = meta(at.block_tables);
  ap.row_list = meta(at.row_list);
  ap.row_list_size = s.row_list_size;
  ap.tile_row0 = meta(at.tile_row0);
  ap.tile_rows = meta(at.tile_rows);
  ap.tiles = s.tiles;
  ap.tile_size = s.tile_size;
  ap.n_head = cfg_.n_head;
  ap.n_kv_head = cfg_.kv_heads();
  ap.head_dim = cfg_.head_dim();
  ap.block_size = shape_.block_size;
  ap.max_context = s.max_context;
  return ap;
}

// Attention of one layer over its pools; probabilities into the layer's
// region when it is recorded.
void CudaBackend::attention(int layer, const LaunchShape& s, kernels::AttentionParams& ap) {
  ap.k_pool = k_pool(layer);
  ap.v_pool = v_pool(layer);
  ap.probs =
      s.probs_slot[layer] >= 0 ? probs_.get() + s.probs_slot[layer] * s.probs_per_layer : nullptr;
  launched(kernels::attention(ap, stream_), "attention kernel");
}

// The residual stream of each entry's last token (for the logit lens):
// slot 0 is the embedding, slot l + 1 the output of block l.
void CudaBackend::record_residual(int slot, const LaunchShape& s) {
  const int c = cfg_.n_embd;
  launched(
      kernels::gather_rows(x_.get(), meta(s.at.last_rows), s.entries, c,
                           resid_.get() + static_cast<size_t>(slot) * s.entries * c, c, stream_),
      "gather kernel (residuals)");
}

// logits = ln_f(x) . lm_head^T (wte^T when tied) for the rows that need them (gathered first unless
// every row does).
void CudaBackend::logits(const LaunchShape& s) {
  const int c = cfg_.n_embd;
  const float* final_in = ln_.get();
  if (s.logit_rows != s.rows) {
    launched(kernels::gather_rows(ln_.get(), meta(s.at.logit_rows), s.logit_rows, c,
                                  final_ln_.get(), c, stream_),
             "gather kernel (logit rows)");
    final_in = final_ln_.get();
  }
  matmul_transposed(final_in, s.logit_rows, c, lm_head_ ? lm_head_ : wte_, cfg_.vocab_size,
                    logits_.get());
}

void CudaBackend::forward(const std::vector<BatchEntry>& batch, const ForwardOptions& options,
                          std::vector<EntryOutput>& outputs) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  if (!pools_.get()) throw Error("cuda forward: init_cache was not called");
  const int c = cfg_.n_embd, hd = cfg_.head_dim(), nh = cfg_.n_head, v = cfg_.vocab_size;

  bool decode = graphs_;
  int largest = 0;
  for (const BatchEntry& b : batch) {
    decode = decode && b.tokens.size() == 1;
    largest = std::max(largest, b.context());
  }
  cuda_detail::PlanOptions po;
  po.block_size = shape_.block_size;
  po.n_head = nh;
  po.vocab_size = v;
  po.n_ctx = cfg_.n_ctx;
  po.pool_slots = pool_slots_;
  po.all_logits = options.all_logits;
  int bucket = 0;
  if (decode) {
    bucket = cuda_detail::context_bucket(largest, cfg_.n_ctx);
    po.max_context = bucket;
    po.probs_stride = bucket;
  } else {
    po.tile_size = kernels::attention_tile_size(largest, hd);
  }
  const ForwardPlan plan = cuda_detail::make_forward_plan(batch, po);

  LaunchShape s;
  s.rows = plan.rows;
  s.entries = plan.entries;
  s.logit_rows = plan.logit_rows;
  s.row_list_size = plan.row_list_size;
  s.tiles = plan.tiles;
  s.tile_size = plan.tile_size;
  s.max_context = plan.max_context;
  s.probs_per_layer = plan.probs_per_layer;
  s.at = plan.at;
  s.residuals = options.record_residuals;
  s.probs_slot.assign(cfg_.n_layer, -1);
  std::vector<bool> recorded(cfg_.n_layer, false);
  int n_recorded = 0;
  for (int l = 0; l < cfg_.n_layer; ++l)
    if (options.wants_attention(l)) {
      recorded[l] = true;
      s.probs_slot[l] = n_recorded++;
    }
  const ResultsLayout layout = ensure_buffers(plan, n_recorded, s.residuals);

  std::memcpy(staging_.get(), plan.packed.data(), plan.packed.size() * sizeof(int));
  check(cudaMemcpyAsync(meta_.get(), staging_.get(), plan.packed.size() * sizeof(int),
                        cudaMemcpyHostToDevice, stream_),
        "uploading the step metadata");
  if (decode)
    run_decode_graph(GraphKey{plan.entries, bucket, recorded, s.residuals}, s);
  else
    enqueue(s);

  // One copy brings back everything the step returns (the probabilities
  // separately when they are too large to stage).
  const size_t staged = layout.stage_probs ? layout.end : layout.small_end;
  check(cudaMemcpyAsync(staging_.get(), results_.get(), staged * sizeof(float),
                        cudaMemcpyDeviceToHost, stream_),
        "copying the step's results");
  // The last layer's output after ln_f, every row (contrastive search): the
  // final residual_layernorm leaves it in ln_.
  std::vector<float> hidden;
  if (options.record_hidden) {
    hidden.resize(static_cast<size_t>(plan.rows) * c);
    check(cudaMemcpyAsync(hidden.data(), ln_.get(), hidden.size() * sizeof(float),
                          cudaMemcpyDeviceToHost, stream_),
          "copying the hidden states");
  }
  outputs.assign(batch.size(), EntryOutput{});
  if (n_recorded > 0 && !layout.stage_probs) {
    for (int e = 0; e < plan.entries; ++e) {
      EntryOutput& out = outputs[e];
      const int n = plan.row_begin[e + 1] - plan.row_begin[e], ctx = plan.context[e];
      out.attention.resize(cfg_.n_layer);
      for (int l = 0; l < cfg_.n_layer; ++l) {
        if (s.probs_slot[l] < 0) continue;
        auto& dst = out.attention[l];
        dst.resize(static_cast<size_t>(nh) * n * ctx);
        const float* src =
            probs_.get() + s.probs_slot[l] * plan.probs_per_layer + plan.probs_offset[e];
        check(cudaMemcpy2DAsync(dst.data(), ctx * sizeof(float), src,
                                plan.probs_stride[e] * sizeof(float), ctx * sizeof(float),
                                static_cast<size_t>(nh) * n, cudaMemcpyDeviceToHost, stream_),
              "copying the attention probabilities");
      }
    }
  }
  check(cudaStreamSynchronize(stream_), "the forward pass");

  // Unpack the staged results per entry.
  const float* host = reinterpret_cast<const float*>(staging_.get());
  for (int e = 0; e < plan.entries; ++e) {
    EntryOutput& out = outputs[e];
    const int n = plan.row_begin[e + 1] - plan.row_begin[e];
    out.logit_rows = plan.logit_begin[e + 1] - plan.logit_begin[e];
    const float* logits = host + layout.logits + static_cast<size_t>(plan.logit_begin[e]) * v;
    out.logits.assign(logits, logits + static_cast<size_t>(out.logit_rows) * v);
    if (n_recorded > 0 && layout.stage_probs) {
      out.attention.resize(cfg_.n_layer);
      const int ctx = plan.context[e];
      for (int l = 0; l < cfg_.n_layer; ++l) {
        if (s.probs_slot[l] < 0) continue;
        auto& dst = out.attention[l];
        dst.resize(static_cast<size_t>(nh) * n * ctx);
        const float* src =
            host + layout.probs + s.probs_slot[l] * plan.probs_per_layer + plan.probs_offset[e];
        for (long long row = 0; row < static_cast<long long>(nh) * n; ++row)
          std::memcpy(dst.data() + row * ctx, src + row * plan.probs_stride[e],
                      ctx * sizeof(float));
      }
    }
    if (!hidden.empty())
      out.hidden.assign(hidden.begin() + static_cast<size_t>(plan.row_begin[e]) * c,
                        hidden.begin() + static_cast<size_t>(plan.row_begin[e + 1]) * c);
    if (s.residuals) {
      out.residuals.resize(static_cast<size_t>(cfg_.n_layer + 1) * c);
      for (int l = 0; l <= cfg_.n_layer; ++l)
        std::memcpy(out.residuals.data() + static_cast<size_t>(l) * c,
                    host + layout.residuals + (static_cast<size_t>(l) * plan.entries + e) * c,
                    c * sizeof(float));
    }
  }
}

}  // namespace ts::cuda_detail

namespace ts {
namespace {

bool probe_device(int* count, std::string* why) {
  const cudaError_t e = cudaGetDeviceCount(count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) {
      int runtime = 0, driver = 0;
      cudaRuntimeGetVersion(&runtime);
      cudaDriverGetVersion(&driver);
      auto version = [](int v) {
        return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
      };
      std::string what;
      if (e == cudaErrorInsufficientDriver)
        what = driver == 0 ? "no NVIDIA driver is loaded"
                           : "the NVIDIA driver (CUDA " + version(driver) +
                                 ") is older than this build's CUDA runtime " + version(runtime);
      else if (e == cudaErrorNoDevice)
        what = "no CUDA device found";
      else
        what = cudaGetErrorString(e);
      *why = what + " (cudaGetDeviceCount: " + cudaGetErrorName(e) + ")";
    }
    return false;
  }
  if (*count == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  if (cudaSetDevice(0) != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = "cudaSetDevice(0) failed";
    return false;
  }
  return kernels::kernels_loadable(why);
}

}  // namespace

bool cuda_device_available(std::string* why) {
  int count = 0;
  return probe_device(&count, why);
}

std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const ModelWeights> weights,
                                           std::string* why_not) {
  std::string why;
  if (!weights) {
    if (why_not) *why_not = "no weights";
    return nullptr;
  }
  int count = 0;
  if (!probe_device(&count, &why)) {
    if (why_not) *why_not = why;
    return nullptr;
  }
  try {
    return std::make_unique<cuda_detail::CudaBackend>(std::move(weights), 0);
  } catch (const Error& e) {
    if (why_not) *why_not = e.what();
    return nullptr;
  }
}

}  // namespace ts
