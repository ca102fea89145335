#include "engine/cpu/cpu_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include "engine/cpu/matmul.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/paged_attention.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace ts {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "CPU";
}

// KV pool memory mapped straight from the kernel: its pages are zero and
// take no resident memory until a slot is written, so a pool sized for every
// lane's full context costs only the blocks the session has used. (A
// zero-filled std::vector touched every page: 755 MB at load for GPT-2 124M.)
class PoolBuffer {
 public:
  explicit PoolBuffer(size_t floats) : bytes_(std::max<size_t>(1, floats) * sizeof(float)) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw Error("KV cache: cannot reserve " + std::to_string(bytes_) + " bytes");
    data_ = static_cast<float*>(p);
  }
  PoolBuffer(PoolBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;
  PoolBuffer& operator=(PoolBuffer&&) = delete;
  ~PoolBuffer() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
  }
  float* data() { return data_; }
  const float* data() const { return data_; }

 private:
  float* data_ = nullptr;
  size_t bytes_ = 0;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::shared_ptr<const ModelWeights> weights, int threads)
      : weights_(std::move(weights)), pool_(threads) {}

  std::string name() const override { return "cpu"; }
  std::string device_name() const override {
    return cpu_model_name() + " (" + std::to_string(pool_.size()) + " threads)";
  }

  void init_cache(const KvCacheShape& shape) override {
    const ModelConfig& cfg = weights_->config;
    if (shape.n_layer != cfg.n_layer || shape.n_head * shape.head_dim != cfg.n_embd)
      throw Error("KV cache shape does not match the model");
    shape_ = shape;
    const size_t per_layer = static_cast<size_t>(shape.num_blocks) * shape.block_size * cfg.n_embd;
    k_pool_.clear();
    v_pool_.clear();
    for (int l = 0; l < cfg.n_layer; ++l) {
      k_pool_.emplace_back(per_layer);
      v_pool_.emplace_back(per_layer);
    }
  }

  void copy_blocks(const std::vector<BlockCopy>& copies) override {
    const size_t c = weights_->config.n_embd;
    for (const BlockCopy& cp : copies) {
      const size_t src = static_cast<size_t>(cp.src_block) * shape_.block_size * c;
      const size_t dst = static_cast<size_t>(cp.dst_block) * shape_.block_size * c;
      const size_t n = static_cast<size_t>(cp.num_slots) * c;
      for (size_t l = 0; l < k_pool_.size(); ++l) {
        std::memcpy(k_pool_[l].data() + dst, k_pool_[l].data() + src, n * sizeof(float));
        std::memcpy(v_pool_[l].data() + dst, v_pool_[l].data() + src, n * sizeof(float));
      }
    }
  }

  void forward(const std::vector<BatchEntry>& batch, const ForwardOptions& options,
               std::vector<EntryOutput>& outputs) override;

 private:
  std::shared_ptr<const ModelWeights> weights_;
  ThreadPool pool_;
  KvCacheShape shape_;
  std::vector<PoolBuffer> k_pool_, v_pool_;  // [layer][slot * C]
};

void CpuBackend::forward(const std::vector<BatchEntry>& batch, const ForwardOptions& options,
                         std::vector<EntryOutput>& outputs) {
  const ModelWeights& w = *weights_;
  const ModelConfig& cfg = w.config;
  const int c = cfg.n_embd, v = cfg.vocab_size, hd = cfg.head_dim(), nh = cfg.n_head;

  // All new tokens of all entries become the rows of one activation matrix,
  // so the weights are read once per step whatever the number of lanes.
  std::vector<int> row_begin(batch.size() + 1, 0);
  for (size_t e = 0; e < batch.size(); ++e)
    row_begin[e + 1] = row_begin[e] + static_cast<int>(batch[e].tokens.size());
  const int rows = row_begin.back();
  std::vector<int> tokens(rows), positions(rows);
  std::vector<std::vector<int>> context_slots(batch.size());
  for (size_t e = 0; e < batch.size(); ++e) {
    const BatchEntry& b = batch[e];
    for (size_t i = 0; i < b.tokens.size(); ++i) {
      tokens[row_begin[e] + i] = b.tokens[i];
      positions[row_begin[e] + i] = b.start_pos + static_cast<int>(i);
    }
    auto& slots = context_slots[e];
    slots.resize(b.context());
    for (int j = 0; j < b.context(); ++j)
      slots[j] = b.block_table[j / shape_.block_size] * shape_.block_size + j % shape_.block_size;
  }

  std::vector<float> x(static_cast<size_t>(rows) * c), ln(x.size()), attn(x.size()), proj(x.size());
  std::vector<float> qkv(static_cast<size_t>(rows) * 3 * c),
      hidden(static_cast<size_t>(rows) * 4 * c);
  cpu::embed(w.wte, w.wpe, tokens.data(), positions.data(), rows, c, x.data());

  outputs.assign(batch.size(), EntryOutput{});
  auto save_residual = [&](int layer_slot) {
    if (!options.record_residuals) return;
    for (size_t e = 0; e < batch.size(); ++e) {
      auto& res = outputs[e].residuals;
      res.resize(static_cast<size_t>(cfg.n_layer + 1) * c);
      std::memcpy(res.data() + static_cast<size_t>(layer_slot) * c,
                  x.data() + static_cast<size_t>(row_begin[e + 1] - 1) * c, sizeof(float) * c);
    }
  };
  save_residual(0);

  for (int l = 0; l < cfg.n_layer; ++l) {
    const LayerWeights& lw = w.layers[l];
    cpu::layernorm(x.data(), lw.ln_1_weight, lw.ln_1_bias, rows, c, cfg.layer_norm_epsilon,
                   ln.data());
    cpu::matmul(ln.data(), rows, c, lw.attn_qkv_weight, 3 * c, lw.attn_qkv_bias, qkv.data(), pool_);
    // Append this step's keys and values to the paged pools.
    for (size_t e = 0; e < batch.size(); ++e) {
      for (size_t i = 0; i < batch[e].tokens.size(); ++i) {
        const float* src = qkv.data() + static_cast<size_t>(row_begin[e] + i) * 3 * c;
        const size_t slot = static_cast<size_t>(batch[e].slots[i]);
        std::memcpy(k_pool_[l].data() + slot * c, src + c, sizeof(float) * c);
        std::memcpy(v_pool_[l].data() + slot * c, src + 2 * c, sizeof(float) * c);
      }
    }
    const bool record = options.wants_attention(l);
    struct Piece {
      int entry, head, r0, r1;
    };
    std::vector<Piece> pieces;
    for (size_t e = 0; e < batch.size(); ++e) {
      const int n = static_cast<int>(batch[e].tokens.size());
      if (record) {
        outputs[e].attention.resize(cfg.n_layer);
        outputs[e].attention[l].assign(static_cast<size_t>(nh) * n * batch[e].context(), 0.0f);
      }
      const int chunk = std::max(1, std::min(n, 32));
      for (int h = 0; h < nh; ++h)
        for (int r0 = 0; r0 < n; r0 += chunk)
          pieces.push_back({static_cast<int>(e), h, r0, std::min(n, r0 + chunk)});
    }
    pool_.parallel_for(static_cast<int>(pieces.size()), [&](int i) {
      const Piece& p = pieces[i];
      const BatchEntry& b = batch[p.entry];
      cpu::PagedAttentionArgs a;
      a.q = qkv.data() + static_cast<size_t>(row_begin[p.entry]) * 3 * c;
      a.ldq = 3 * c;
      a.k_pool = k_pool_[l].data();
      a.v_pool = v_pool_[l].data();
      a.context_slots = context_slots[p.entry].data();
      a.start_pos = b.start_pos;
      a.rows = static_cast<int>(b.tokens.size());
      a.n_head = nh;
      a.head_dim = hd;
      a.out = attn.data() + static_cast<size_t>(row_begin[p.entry]) * c;
      a.probs = record ? outputs[p.entry].attention[l].data() : nullptr;
      a.context = b.context();
      cpu::paged_attention(a, p.head, p.r0, p.r1);
    });
    cpu::matmul(attn.data(), rows, c, lw.attn_proj_weight, c, lw.attn_proj_bias, proj.data(),
                pool_);
    cpu::add_inplace(x.data(), proj.data(), static_cast<long long>(rows) * c);
    cpu::layernorm(x.data(), lw.ln_2_weight, lw.ln_2_bias, rows, c, cfg.layer_norm_epsilon,
                   ln.data());
    cpu::matmul(ln.data(), rows, c, lw.mlp_fc_weight, 4 * c, lw.mlp_fc_bias, hidden.data(), pool_);
    // tanh is the costliest element-wise op of a prefill: spread it over the pool.
    const long long hidden_n = static_cast<long long>(rows) * 4 * c;
    const int gelu_tasks =
        std::max(1, std::min(pool_.size() * 4, static_cast<int>(hidden_n / 16384)));
    pool_.parallel_for(gelu_tasks, [&](int t) {
      const long long begin = hidden_n * t / gelu_tasks, end = hidden_n * (t + 1) / gelu_tasks;
      cpu::gelu_new(hidden.data() + begin, end - begin);
    });
    cpu::matmul(hidden.data(), rows, 4 * c, lw.mlp_proj_weight, c, lw.mlp_proj_bias, proj.data(),
                pool_);
    cpu::add_inplace(x.data(), proj.data(), static_cast<long long>(rows) * c);
    save_residual(l + 1);
  }

  // Final layer norm and the tied unembedding, only for rows that need logits.
  std::vector<int> logit_rows;
  for (size_t e = 0; e < batch.size(); ++e) {
    const int first = options.all_logits ? row_begin[e] : row_begin[e + 1] - 1;
    for (int r = first; r < row_begin[e + 1]; ++r) logit_rows.push_back(r);
  }
  std::vector<float> final_in(logit_rows.size() * c), final_ln(final_in.size());
  for (size_t i = 0; i < logit_rows.size(); ++i)
    std::memcpy(final_in.data() + i * c, x.data() + static_cast<size_t>(logit_rows[i]) * c,
                sizeof(float) * c);
  cpu::layernorm(final_in.data(), w.ln_f_weight, w.ln_f_bias, static_cast<int>(logit_rows.size()),
                 c, cfg.layer_norm_epsilon, final_ln.data());
  std::vector<float> logits(logit_rows.size() * static_cast<size_t>(v));
  cpu::matmul_transposed(final_ln.data(), static_cast<int>(logit_rows.size()), c, w.wte, v,
                         logits.data(), pool_);
  size_t at = 0;
  for (size_t e = 0; e < batch.size(); ++e) {
    const int n = options.all_logits ? static_cast<int>(batch[e].tokens.size()) : 1;
    outputs[e].logit_rows = n;
    outputs[e].logits.assign(logits.begin() + static_cast<long>(at * v),
                             logits.begin() + static_cast<long>((at + n) * v));
    at += n;
  }
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const ModelWeights> weights,
                                          int threads) {
  if (!weights) throw Error("cpu backend: no weights");
  return std::make_unique<CpuBackend>(std::move(weights), threads);
}

}  // namespace ts
