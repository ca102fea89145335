#include "kernel_harness.h"

#include <algorithm>

#include "engine/cuda/cuda_util.h"
#include "engine/cuda/forward_plan.h"
#include "kernels.cuh"
#include "util/error.h"

namespace ts::cuda_check {
namespace {

using cuda_detail::check;

template <typename T>
class Dev {
 public:
  // All bits set (a NaN for floats): an output a kernel leaves unwritten shows.
  explicit Dev(size_t n) : n_(n) {
    p_ = static_cast<T*>(cuda_detail::device_alloc(n * sizeof(T), "test buffer"));
    if (n) check(cudaMemset(p_, 0xff, n * sizeof(T)), "test buffer fill");
  }
  explicit Dev(const std::vector<T>& v) : Dev(v.size()) {
    if (!v.empty())
      check(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "test upload");
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { cudaFree(p_); }
  T* get() const { return p_; }
  std::vector<T> read() const {
    std::vector<T> v(n_);
    if (n_)
      check(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "test download");
    return v;
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

void finish(cudaError_t launch, const char* what) {
  check(launch, what);
  check(cudaDeviceSynchronize(), what);
}

}  // namespace

std::vector<float> embed(const std::vector<float>& wte, const std::vector<float>& wpe,
                         const std::vector<int>& tokens, const std::vector<int>& positions, int c) {
  const int rows = static_cast<int>(tokens.size());
  Dev<float> dwte(wte), dwpe(wpe), out(static_cast<size_t>(rows) * c);
  Dev<int> dt(tokens), dp(positions);
  finish(kernels::embed(dwte.get(), dwpe.get(), dt.get(), dp.get(), rows, c, out.get(), nullptr),
         "embed kernel");
  return out.read();
}

namespace {
kernels::HalfFormat half(bool bf16) {
  return bf16 ? kernels::HalfFormat::kBf16 : kernels::HalfFormat::kF16;
}
}  // namespace

std::vector<float> matmul_half(const std::vector<float>& x, int m, int k,
                               const std::vector<uint16_t>& w, bool bf16, int n, bool split) {
  Dev<float> dx(x), out(static_cast<size_t>(m) * n);
  Dev<uint16_t> dw(w);
  const size_t need = split ? kernels::matmul_half_workspace(m, k, n) : 0;
  Dev<float> workspace(std::max<size_t>(need, 1));
  finish(kernels::matmul_half(dx.get(), m, k, dw.get(), half(bf16), n, out.get(),
                              need ? workspace.get() : nullptr, need, nullptr),
         "16-bit matmul kernel");
  return out.read();
}

std::vector<float> matmul_half_transposed(const std::vector<float>& x, int m, int k,
                                          const std::vector<uint16_t>& w, bool bf16, int n) {
  Dev<float> dx(x), out(static_cast<size_t>(m) * n);
  Dev<uint16_t> dw(w);
  finish(
      kernels::matmul_half_transposed(dx.get(), m, k, dw.get(), half(bf16), n, out.get(), nullptr),
      "16-bit transposed matmul kernel");
  return out.read();
}

std::vector<float> embed_half(const std::vector<uint16_t>& wte, bool bf16,
                              const std::vector<float>& wpe, const std::vector<int>& tokens,
                              const std::vector<int>& positions, int c) {
  const int rows = static_cast<int>(tokens.size());
  Dev<uint16_t> dwte(wte);
  Dev<float> dwpe(wpe), out(static_cast<size_t>(rows) * c);
  Dev<int> dt(tokens), dp(positions);
  finish(kernels::embed_half(dwte.get(), half(bf16), dwpe.get(), dt.get(), dp.get(), rows, c,
                             out.get(), nullptr),
         "16-bit embed kernel");
  return out.read();
}

std::vector<float> layernorm(const std::vector<float>& x, const std::vector<float>& weight,
                             const std::vector<float>& bias, int rows, int c, float eps) {
  Dev<float> dx(x), dw(weight), db(bias), out(static_cast<size_t>(rows) * c);
  finish(kernels::layernorm(dx.get(), dw.get(), db.get(), rows, c, eps, out.get(), nullptr),
         "layernorm kernel");
  return out.read();
}

std::vector<float> residual_layernorm(std::vector<float>& x, const std::vector<float>& y,
                                      const std::vector<float>& y_bias,
                                      const std::vector<float>& weight,
                                      const std::vector<float>& bias, int rows, int c, float eps) {
  Dev<float> dx(x), dy(y), dyb(y_bias), dw(weight), db(bias), out(static_cast<size_t>(rows) * c);
  finish(kernels::residual_layernorm(dx.get(), dy.get(), dyb.get(), dw.get(), db.get(), rows, c,
                                     eps, out.get(), nullptr),
         "residual layernorm kernel");
  x = dx.read();
  return out.read();
}

std::vector<float> bias_gelu(const std::vector<float>& x, const std::vector<float>& bias, int rows,
                             int n) {
  Dev<float> dx(x), db(bias);
  finish(kernels::bias_gelu(dx.get(), db.get(), rows, n, nullptr), "gelu kernel");
  return dx.read();
}

void bias_kv_append(std::vector<float>& qkv, const std::vector<float>& bias,
                    const std::vector<int>& slots, int c, std::vector<float>& k_pool,
                    std::vector<float>& v_pool) {
  Dev<float> dq(qkv), db(bias), dk(k_pool), dv(v_pool);
  Dev<int> ds(slots);
  finish(kernels::bias_kv_append(dq.get(), db.get(), ds.get(), static_cast<int>(slots.size()), c, c,
                                 dk.get(), dv.get(), nullptr),
         "KV append kernel");
  qkv = dq.read();
  k_pool = dk.read();
  v_pool = dv.read();
}

std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& weight, int rows,
                           int c, float eps) {
  Dev<float> dx(x), dw(weight), out(static_cast<size_t>(rows) * c);
  finish(kernels::rmsnorm(dx.get(), dw.get(), rows, c, eps, out.get(), nullptr), "rmsnorm kernel");
  return out.read();
}

std::vector<float> residual_rmsnorm(std::vector<float>& x, const std::vector<float>& y,
                                    const std::vector<float>& weight, int rows, int c, float eps) {
  Dev<float> dx(x), dy(y), dw(weight), out(static_cast<size_t>(rows) * c);
  finish(kernels::residual_rmsnorm(dx.get(), dy.get(), dw.get(), rows, c, eps, out.get(), nullptr),
         "residual rmsnorm kernel");
  x = dx.read();
  return out.read();
}

std::vector<float> rope(const std::vector<float>& qkv, int ld, const std::vector<float>& bias,
                        const std::vector<int>& positions, int n_head, int n_kv_head, int head_dim,
                        float theta) {
  Dev<float> dq(qkv), db(bias);
  Dev<int> dp(positions);
  finish(kernels::rope(dq.get(), ld, bias.empty() ? nullptr : db.get(), dp.get(),
                       static_cast<int>(positions.size()), n_head, n_kv_head, head_dim, theta,
                       nullptr),
         "rope kernel");
  return dq.read();
}

std::vector<float> swiglu(const std::vector<float>& gate_up, int rows, int n) {
  Dev<float> dg(gate_up), out(static_cast<size_t>(rows) * n);
  finish(kernels::swiglu(dg.get(), rows, n, out.get(), nullptr), "swiglu kernel");
  return out.read();
}

std::vector<float> gather_rows(const std::vector<float>& src, const std::vector<int>& index,
                               int c) {
  Dev<float> ds(src), out(index.size() * c);
  Dev<int> di(index);
  finish(kernels::gather_rows(ds.get(), di.get(), static_cast<int>(index.size()), c, out.get(), c,
                              nullptr),
         "gather kernel");
  return out.read();
}

int attention_tile_size(int max_context, int head_dim) {
  return kernels::attention_tile_size(max_context, head_dim);
}

AttentionResult paged_attention(const std::vector<BatchEntry>& batch, const std::vector<float>& qkv,
                                const std::vector<float>& k_pool, const std::vector<float>& v_pool,
                                int n_head, int head_dim, int block_size, AttentionKernel kernel,
                                bool want_probs, int tile_size, int probs_stride, int n_kv_head) {
  const int c = n_head * head_dim, kv = (n_kv_head > 0 ? n_kv_head : n_head) * head_dim;
  check(kernels::attention_prepare(), "attention kernel setup");
  int largest = 0;
  for (const BatchEntry& b : batch) largest = std::max(largest, b.context());
  cuda_detail::PlanOptions po;
  po.block_size = block_size;
  po.n_head = n_head;
  po.pool_slots = static_cast<long long>(k_pool.size() / kv);
  po.probs_stride = probs_stride;
  po.max_context = probs_stride > 0 ? probs_stride : 0;
  const int max_tile = kernels::attention_tile_size(std::max(largest, po.max_context), head_dim);
  if (kernel != AttentionKernel::kRow) {
    po.tile_size = tile_size > 0 ? std::min(tile_size, max_tile) : max_tile;
    if (kernel == AttentionKernel::kTile) {
      if (po.tile_size <= 0) throw Error("the tile kernel does not fit this context");
      po.tile_min_rows = 1;
    }
  }
  const cuda_detail::ForwardPlan plan = cuda_detail::make_forward_plan(batch, po);

  Dev<float> dq(qkv), dk(k_pool), dv(v_pool), out(static_cast<size_t>(plan.rows) * c);
  Dev<float> probs(want_probs ? static_cast<size_t>(plan.probs_per_layer) : 1);
  Dev<int> meta(plan.packed);
  const int* m = meta.get();
  kernels::AttentionParams ap;
  ap.qkv = dq.get();
  ap.k_pool = dk.get();
  ap.v_pool = dv.get();
  ap.out = out.get();
  ap.probs = want_probs ? probs.get() : nullptr;
  ap.row_entry = m + plan.at.row_entry;
  ap.row_local = m + plan.at.row_local;
  ap.row_key = m + plan.at.row_key;
  ap.row_mask = m + plan.at.row_mask;
  ap.masks = m + plan.at.masks;
  ap.entry_context = m + plan.at.entry_context;
  ap.entry_rows = m + plan.at.entry_rows;
  ap.entry_bt_offset = m + plan.at.entry_bt_offset;
  ap.entry_probs_offset = m + plan.at.entry_probs_offset;
  ap.entry_probs_stride = m + plan.at.entry_probs_stride;
  ap.block_tables = m + plan.at.block_tables;
  ap.row_list = m + plan.at.row_list;
  ap.row_list_size = plan.row_list_size;
  ap.tile_row0 = m + plan.at.tile_row0;
  ap.tile_rows = m + plan.at.tile_rows;
  ap.tiles = plan.tiles;
  ap.tile_size = plan.tile_size;
  ap.n_head = n_head;
  ap.n_kv_head = n_kv_head;
  ap.head_dim = head_dim;
  ap.block_size = block_size;
  ap.max_context = plan.max_context;
  if (kernel == AttentionKernel::kTile && plan.row_list_size > 0)
    throw Error("attention harness: rows left for the row kernel");
  if (kernel == AttentionKernel::kRow && plan.tiles > 0)
    throw Error("attention harness: tiles planned for the row kernel");
  finish(kernels::attention(ap, nullptr), "attention kernel");

  AttentionResult r;
  r.out = out.read();
  if (want_probs) {
    const std::vector<float> all = probs.read();
    for (int e = 0; e < plan.entries; ++e) {
      const int n = plan.row_begin[e + 1] - plan.row_begin[e], ctx = plan.context[e];
      std::vector<float> p(static_cast<size_t>(n_head) * n * ctx);
      for (long long row = 0; row < static_cast<long long>(n_head) * n; ++row)
        std::copy_n(all.begin() + plan.probs_offset[e] + row * plan.probs_stride[e], ctx,
                    p.begin() + row * ctx);
      r.probs.push_back(std::move(p));
    }
  }
  return r;
}

double device_copy_bandwidth(std::string* device) {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  if (device) *device = prop.name;
  const size_t bytes = size_t(1) << 30;
  Dev<unsigned char> a(bytes), b(bytes);
  check(cudaMemset(a.get(), 1, bytes), "cudaMemset");
  // The first copy warms up.
  const float best_ms = cuda_detail::best_milliseconds(1, 5, nullptr, [&] {
    check(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, nullptr),
          "cudaMemcpy");
  });
  return 2.0 * static_cast<double>(bytes) / (best_ms * 1e-3);
}

}  // namespace ts::cuda_check
