// The reference backend: the forward pass of GPT-2 or of the Llama family
// (one function each) in fp32 on the host (the
// matmul weights in fp32, bf16 or f16, read as stored: ModelWeights::format;
// the KV cache in fp32, f16, bf16 or q8: KvCacheShape::format). forward()
// reads as the model, one op per line; the ops are in their own files, named
// after the CUDA kernels they are twins of (layernorm.cpp <-> kernels/layernorm.cu,
// ...), and the plumbing (the batch's row layout, the attention's work split
// over the thread pool, the logits rows) is in helpers below forward().
#include "engine/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include <unistd.h>

#include "engine/cpu/attention.h"
#include "engine/cpu/embedding.h"
#include "engine/cpu/gelu.h"
#include "engine/cpu/kv_append.h"
#include "engine/cpu/layernorm.h"
#include "engine/cpu/machine_probe.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/rmsnorm.h"
#include "engine/cpu/rope.h"
#include "engine/cpu/swiglu.h"
#include "util/anonymous_memory.h"
#include "util/error.h"
#include "util/proc_fields.h"
#include "util/thread_pool.h"

namespace ts {
namespace {

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? int64_t{pages} * page : 0;
}

int64_t available_memory_bytes() {
  return std::max<int64_t>(0, ProcFields::read("/proc/meminfo").bytes("MemAvailable", 0));
}

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

// Rows of logits whose buffer the backend keeps between steps (6.4 MB for
// GPT-2's vocabulary); more (a prefill's every row) are freed after the step.
constexpr size_t kKeptLogitRows = 32;

// All new tokens of all entries are the rows of one activation matrix, entry
// after entry, so the weights are read once per step whatever the number of lanes.
struct BatchRows {
  std::vector<int> row_begin;  // [entries + 1]: entry e owns rows [row_begin[e], row_begin[e+1])
  std::vector<int> tokens, positions, slots;    // per row
  std::vector<std::vector<int>> context_slots;  // per entry: KV slot of positions 0..context-1
  int rows() const { return row_begin.back(); }
};

// The activations of one forward, [rows][width] each (widths from the config:
// GPT-2's C, 3C, C, 4C; a Llama's q_dim + 2 kv_dim, q_dim, 2 I and I).
struct Activations {
  std::vector<float> x;       // the residual stream [C]
  std::vector<float> ln;      // the latest norm's output [C]
  std::vector<float> qkv;     // [qkv_dim]
  std::vector<float> attn;    // attention output, heads side by side [q_dim]
  std::vector<float> proj;    // output of a projection back to C [C]
  std::vector<float> hidden;  // the MLP's hidden layer [fc_dim] (SwiGLU: gate | up)
  std::vector<float> gated;   // SwiGLU's output [I] (empty for GPT-2)
  Activations(int rows, const ModelConfig& cfg)
      : x(size_t(rows) * cfg.n_embd),
        ln(x.size()),
        qkv(size_t(rows) * cfg.qkv_dim()),
        attn(size_t(rows) * cfg.q_dim()),
        proj(x.size()),
        hidden(size_t(rows) * cfg.fc_dim()),
        gated(cfg.is_gpt2() ? 0 : size_t(rows) * cfg.mlp_dim()) {}
  int64_t bytes() const {
    return int64_t(sizeof(float)) * int64_t(x.size() + ln.size() + qkv.size() + attn.size() +
                                            proj.size() + hidden.size() + gated.size());
  }
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(std::shared_ptr<const ModelWeights> weights, int threads)
      : weights_(std::move(weights)), pool_(threads) {}

  std::string name() const override { return "cpu"; }
  bool stores_kv_format(WeightFormat) const override { return true; }
  std::string device_name() const override {
    return cpu_model_name() + " (" + std::to_string(pool_.size()) +
           (pool_.size() == 1 ? " thread)" : " threads)");
  }
  BackendMemory memory() const override;
  int64_t kv_budget_bytes() const override { return physical_memory_bytes(); }
  std::string kv_budget_name() const override { return "this machine's"; }
  HardwareRoofs measure_roofs(int cpu_threads, double working_set_bytes) const override;
  double measure_bandwidth(int cpu_threads) const override;
  void init_cache(const KvCacheShape& shape) override;
  void copy_blocks(const std::vector<BlockCopy>& copies) override;
  void move_slots(const std::vector<SlotMove>& moves) override;
  void forward(const std::vector<BatchEntry>& batch, const ForwardOptions& options,
               std::vector<EntryOutput>& outputs) override;

 private:
  void forward_gpt2(const BatchRows& in, const std::vector<BatchEntry>& batch,
                    const ForwardOptions& options, Activations& a,
                    std::vector<EntryOutput>& outputs);
  void forward_llama(const BatchRows& in, const std::vector<BatchEntry>& batch,
                     const ForwardOptions& options, Activations& a,
                     std::vector<EntryOutput>& outputs);
  BatchRows lay_out(const std::vector<BatchEntry>& batch) const;
  void attention(int layer, const std::vector<BatchEntry>& batch, const BatchRows& in,
                 Activations& a, bool record, std::vector<EntryOutput>& outputs);
  void gelu(std::vector<float>& hidden);
  void record_residual(int slot, const BatchRows& in, const std::vector<float>& x,
                       std::vector<EntryOutput>& outputs) const;
  // Returns the bytes of the rows and logits matrices it allocated.
  int64_t logits(const std::vector<float>& ln_f, const BatchRows& in, bool all_rows,
                 std::vector<EntryOutput>& outputs);
  void record_hidden(const BatchRows& in, const std::vector<float>& ln_f,
                     std::vector<EntryOutput>& outputs) const;

  std::shared_ptr<const ModelWeights> weights_;
  ThreadPool pool_;
  KvCacheShape shape_;
  // Bytes of one slot's K (or V) row: kv_dim values (C for GPT-2) in shape_.format
  // (q8: kv_dim / 32 blocks of 34 bytes).
  size_t row_bytes() const { return size_t(shape_.bytes_per_row()); }
  char* k_bytes(size_t layer) { return reinterpret_cast<char*>(k_pool_[layer].data()); }
  char* v_bytes(size_t layer) { return reinterpret_cast<char*>(v_pool_[layer].data()); }

  // [layer][slot * C] values in shape_.format; anonymous memory straight from the kernel, whose
  // pages are zero and take no resident memory until a slot is written, so a pool sized for every
  // lane's full context costs only the blocks the session has used. (A zero-filled std::vector
  // touched every page: 755 MB at load for GPT-2 124M.)
  std::vector<AnonymousMemory> k_pool_, v_pool_;
  std::vector<float> logits_scratch_;  // logits() of the rows that need them, [rows][vocab]
  // Scratch of the last and the largest forward (read by memory()).
  std::atomic<int64_t> scratch_last_{0}, scratch_peak_{0};
};

void CpuBackend::forward(const std::vector<BatchEntry>& batch, const ForwardOptions& options,
                         std::vector<EntryOutput>& outputs) {
  const ModelWeights& w = *weights_;
  const BatchRows in = lay_out(batch);
  Activations a(in.rows(), w.config);
  outputs.assign(batch.size(), EntryOutput{});
  if (w.config.is_gpt2())
    forward_gpt2(in, batch, options, a, outputs);
  else
    forward_llama(in, batch, options, a, outputs);
  // a.ln holds the final norm's output.
  if (options.record_hidden) record_hidden(in, a.ln, outputs);
  const int64_t logits_scratch = logits(a.ln, in, options.all_logits, outputs);
  const int64_t scratch = a.bytes() + logits_scratch;
  scratch_last_ = scratch;
  if (scratch > scratch_peak_) scratch_peak_ = scratch;
}

// GPT-2, one block per iteration: x += attn(ln_1(x)); x += mlp(ln_2(x)).
// Each residual add is fused with the layer norm that reads it (the same
// steps, in the same order, as CudaBackend::enqueue), so ln_1 of a block is
// computed by the step before it and ln_f by the last block's.
void CpuBackend::forward_gpt2(const BatchRows& in, const std::vector<BatchEntry>& batch,
                              const ForwardOptions& options, Activations& a,
                              std::vector<EntryOutput>& outputs) {
  const ModelWeights& w = *weights_;
  const int c = w.config.n_embd, rows = in.rows();
  const float eps = w.config.layer_norm_epsilon;
  cpu::embed(w.wte_matrix(), w.wpe, in.tokens.data(), in.positions.data(), rows, c, a.x.data());
  if (options.record_residuals) record_residual(0, in, a.x, outputs);
  cpu::layernorm(a.x.data(), w.layers[0].ln_1_weight, w.layers[0].ln_1_bias, rows, c, eps,
                 a.ln.data());  // ln_1 of block 0
  for (int l = 0; l < w.config.n_layer; ++l) {
    const LayerWeights& L = w.layers[l];
    const bool last = l + 1 == w.config.n_layer;
    // ln_1 -> qkv -> KV append -> attention -> proj + residual, ln_2
    cpu::matmul(a.ln.data(), rows, c, w.qkv(L), 3 * c, L.attn_qkv_bias, a.qkv.data(), pool_);
    cpu::kv_append(a.qkv.data(), in.slots.data(), rows, c, shape_.format, k_pool_[l].data(),
                   v_pool_[l].data());
    attention(l, batch, in, a, options.wants_attention(l), outputs);
    cpu::matmul(a.attn.data(), rows, c, w.attn_proj(L), c, L.attn_proj_bias, a.proj.data(), pool_);
    cpu::residual_layernorm(a.x.data(), a.proj.data(), L.ln_2_weight, L.ln_2_bias, rows, c, eps,
                            a.ln.data());
    // fc -> gelu -> proj + residual, then the next block's ln_1 (ln_f after the last)
    cpu::matmul(a.ln.data(), rows, c, w.fc(L), 4 * c, L.mlp_fc_bias, a.hidden.data(), pool_);
    gelu(a.hidden);
    cpu::matmul(a.hidden.data(), rows, 4 * c, w.mlp_proj(L), c, L.mlp_proj_bias, a.proj.data(),
                pool_);
    cpu::residual_layernorm(
        a.x.data(), a.proj.data(), last ? w.ln_f_weight : w.layers[l + 1].ln_1_weight,
        last ? w.ln_f_bias : w.layers[l + 1].ln_1_bias, rows, c, eps, a.ln.data());
    if (options.record_residuals) record_residual(l + 1, in, a.x, outputs);
  }
}

// Llama / Qwen2, one block per iteration: x += attn(rms_1(x)); x += mlp(rms_2(x)),
// with RoPE on q and k before the KV append (keys are cached rotated),
// grouped-query attention, and mlp = down(silu(gate(h)) * up(h)). The
// residual adds are fused with the norms as in forward_gpt2.
void CpuBackend::forward_llama(const BatchRows& in, const std::vector<BatchEntry>& batch,
                               const ForwardOptions& options, Activations& a,
                               std::vector<EntryOutput>& outputs) {
  const ModelWeights& w = *weights_;
  const ModelConfig& cfg = w.config;
  const int c = cfg.n_embd, rows = in.rows(), q = cfg.q_dim(), kv = cfg.kv_dim();
  const float eps = cfg.layer_norm_epsilon;
  cpu::embed(w.wte_matrix(), nullptr, in.tokens.data(), in.positions.data(), rows, c, a.x.data());
  if (options.record_residuals) record_residual(0, in, a.x, outputs);
  cpu::rmsnorm(a.x.data(), w.layers[0].ln_1_weight, rows, c, eps, a.ln.data());
  for (int l = 0; l < cfg.n_layer; ++l) {
    const LayerWeights& L = w.layers[l];
    const float* next_norm = l + 1 == cfg.n_layer ? w.ln_f_weight : w.layers[l + 1].ln_1_weight;
    // rms_1 -> q|k|v (+ Qwen2's biases) -> RoPE -> KV append -> attention -> o_proj + residual
    cpu::matmul(a.ln.data(), rows, c, w.qkv(L), q + 2 * kv, L.attn_qkv_bias, a.qkv.data(), pool_);
    cpu::rope(a.qkv.data(), q + 2 * kv, in.positions.data(), rows, cfg.n_head, cfg.kv_heads(),
              cfg.head_dim(), cfg.rope_theta);
    if (options.record_qk_layer == l)
      for (size_t e = 0; e < outputs.size(); ++e)
        for (int r = in.row_begin[e]; r < in.row_begin[e + 1]; ++r) {
          const float* row = a.qkv.data() + size_t(r) * (q + 2 * kv);
          outputs[e].qk.insert(outputs[e].qk.end(), row, row + q + kv);
        }
    cpu::kv_append(a.qkv.data(), in.slots.data(), rows, q, kv, shape_.format, k_pool_[l].data(),
                   v_pool_[l].data());
    attention(l, batch, in, a, options.wants_attention(l), outputs);
    cpu::matmul(a.attn.data(), rows, q, w.attn_proj(L), c, nullptr, a.proj.data(), pool_);
    cpu::residual_rmsnorm(a.x.data(), a.proj.data(), L.ln_2_weight, rows, c, eps, a.ln.data());
    // gate|up -> swiglu -> down + residual, then the next block's rms_1 (the final norm after the
    // last)
    cpu::matmul(a.ln.data(), rows, c, w.fc(L), cfg.fc_dim(), nullptr, a.hidden.data(), pool_);
    cpu::swiglu(a.hidden.data(), rows, cfg.mlp_dim(), a.gated.data());
    cpu::matmul(a.gated.data(), rows, cfg.mlp_dim(), w.mlp_proj(L), c, nullptr, a.proj.data(),
                pool_);
    cpu::residual_rmsnorm(a.x.data(), a.proj.data(), next_norm, rows, c, eps, a.ln.data());
    if (options.record_residuals) record_residual(l + 1, in, a.x, outputs);
  }
}

// ---- plumbing ----

BatchRows CpuBackend::lay_out(const std::vector<BatchEntry>& batch) const {
  BatchRows in;
  in.row_begin.assign(batch.size() + 1, 0);
  in.context_slots.resize(batch.size());
  for (size_t e = 0; e < batch.size(); ++e) {
    const BatchEntry& b = batch[e];
    in.row_begin[e + 1] = in.row_begin[e] + static_cast<int>(b.tokens.size());
    for (size_t i = 0; i < b.tokens.size(); ++i) {
      in.tokens.push_back(b.tokens[i]);
      in.positions.push_back(b.position(static_cast<int>(i)));
      in.slots.push_back(b.slots[i]);
    }
    std::vector<int>& slots = in.context_slots[e];
    slots.resize(b.context());
    for (int j = 0; j < b.context(); ++j)
      slots[j] = b.block_table[j / shape_.block_size] * shape_.block_size + j % shape_.block_size;
  }
  return in;
}

// Attention of every entry's new rows over its own context, split into
// (entry, heads, up to 32 rows) pieces spread over the pool: one head per
// piece for several rows, and for one row (a decode step) two pieces per
// thread of n_head / (2 x threads) heads, whose slices of each cached row
// are read as one run.
void CpuBackend::attention(int layer, const std::vector<BatchEntry>& batch, const BatchRows& in,
                           Activations& a, bool record, std::vector<EntryOutput>& outputs) {
  const ModelConfig& cfg = weights_->config;
  const int ldq = cfg.qkv_dim(), q_dim = cfg.q_dim();
  struct Piece {
    int entry, h0, h1, r0, r1;
  };
  std::vector<Piece> pieces;
  for (size_t e = 0; e < batch.size(); ++e) {
    const int n = static_cast<int>(batch[e].tokens.size());
    if (record) {
      outputs[e].attention.resize(cfg.n_layer);
      outputs[e].attention[layer].assign(static_cast<size_t>(cfg.n_head) * n * batch[e].context(),
                                         0.0f);
    }
    const int chunk = std::max(1, std::min(n, 32));
    const int heads = n == 1 ? std::max(1, cfg.n_head / (2 * pool_.size())) : 1;
    for (int h = 0; h < cfg.n_head; h += heads)
      for (int r0 = 0; r0 < n; r0 += chunk)
        pieces.push_back(
            {static_cast<int>(e), h, std::min(cfg.n_head, h + heads), r0, std::min(n, r0 + chunk)});
  }
  pool_.parallel_for(static_cast<int>(pieces.size()), [&](int i) {
    const Piece& p = pieces[i];
    const BatchEntry& b = batch[p.entry];
    const size_t row0 = static_cast<size_t>(in.row_begin[p.entry]);
    cpu::AttentionArgs args;
    args.q = a.qkv.data() + row0 * ldq;
    args.ldq = ldq;
    args.k_pool = k_pool_[layer].data();
    args.v_pool = v_pool_[layer].data();
    args.kv_format = shape_.format;
    args.context_slots = in.context_slots[p.entry].data();
    args.start_pos = b.start_pos;
    args.rows = static_cast<int>(b.tokens.size());
    args.n_head = cfg.n_head;
    args.head_dim = cfg.head_dim();
    args.n_kv_head = cfg.kv_heads();
    args.out = a.attn.data() + row0 * q_dim;
    args.probs = record ? outputs[p.entry].attention[layer].data() : nullptr;
    args.context = b.context();
    args.mask = b.masked() ? b.mask.data() : nullptr;
    cpu::attention(args, p.h0, p.h1, p.r0, p.r1);
  });
}

// tanh is the costliest element-wise op of a prefill: spread it over the pool.
void CpuBackend::gelu(std::vector<float>& hidden) {
  const long long n = static_cast<long long>(hidden.size());
  const int tasks = std::max(1, std::min(pool_.size() * 4, static_cast<int>(n / 16384)));
  pool_.parallel_for(tasks, [&](int t) {
    const long long begin = n * t / tasks, end = n * (t + 1) / tasks;
    cpu::gelu(hidden.data() + begin, end - begin);
  });
}

// The residual stream of each entry's last token (for the logit lens):
// slot 0 is the embedding, slot l + 1 the output of block l.
void CpuBackend::record_residual(int slot, const BatchRows& in, const std::vector<float>& x,
                                 std::vector<EntryOutput>& outputs) const {
  const ModelConfig& cfg = weights_->config;
  const size_t c = cfg.n_embd;
  for (size_t e = 0; e < outputs.size(); ++e) {
    std::vector<float>& res = outputs[e].residuals;
    res.resize((cfg.n_layer + 1) * c);
    std::memcpy(res.data() + slot * c, x.data() + (in.row_begin[e + 1] - 1) * c, sizeof(float) * c);
  }
}

// The last layer's hidden state after the final norm, every new row of each entry.
void CpuBackend::record_hidden(const BatchRows& in, const std::vector<float>& ln_f,
                               std::vector<EntryOutput>& outputs) const {
  const size_t c = weights_->config.n_embd;
  for (size_t e = 0; e < outputs.size(); ++e)
    outputs[e].hidden.assign(ln_f.begin() + in.row_begin[e] * c,
                             ln_f.begin() + in.row_begin[e + 1] * c);
}

// logits = final_norm(x) . unembedding^T (wte, or an untied lm_head) for
// the rows that need them: every new token's with all_rows, else each entry's last.
int64_t CpuBackend::logits(const std::vector<float>& ln_f, const BatchRows& in, bool all_rows,
                           std::vector<EntryOutput>& outputs) {
  const ModelWeights& w = *weights_;
  const size_t c = w.config.n_embd, v = w.config.vocab_size;
  std::vector<float> rows_in;
  std::vector<int> count(outputs.size());
  for (size_t e = 0; e < outputs.size(); ++e) {
    const int first = all_rows ? in.row_begin[e] : in.row_begin[e + 1] - 1;
    count[e] = in.row_begin[e + 1] - first;
    rows_in.insert(rows_in.end(), ln_f.begin() + first * c, ln_f.begin() + in.row_begin[e + 1] * c);
  }
  const int n = static_cast<int>(rows_in.size() / c);
  // Kept from step to step up to kKeptLogitRows rows (a decode step's lanes
  // or beams, a speculative verify pass): a new 200 KB buffer per GPT-2 step
  // came from memory the allocator had returned to the system, and its first
  // writes were page faults (5 to 6 a step, 13 us each on a 2-vCPU VM). A
  // prefill's all-row logits (206 MB for 1,024 tokens) are let go after it.
  std::vector<float>& all = logits_scratch_;
  all.resize(static_cast<size_t>(n) * v);
  const int64_t bytes = int64_t(sizeof(float)) * int64_t(rows_in.size() + all.size());
  cpu::matmul_transposed(rows_in.data(), n, static_cast<int>(c), w.unembedding(),
                         static_cast<int>(v), all.data(), pool_);
  size_t at = 0;
  for (size_t e = 0; e < outputs.size(); ++e) {
    outputs[e].logit_rows = count[e];
    outputs[e].logits.assign(all.begin() + at * v, all.begin() + (at + count[e]) * v);
    at += count[e];
  }
  if (all.capacity() > kKeptLogitRows * v) std::vector<float>().swap(all);
  return bytes;
}

void CpuBackend::init_cache(const KvCacheShape& shape) {
  const ModelConfig& cfg = weights_->config;
  if (shape.n_layer != cfg.n_layer || shape.n_head != cfg.kv_heads() ||
      shape.head_dim != cfg.head_dim())
    throw Error("KV cache shape does not match the model");
  if (shape.block_size <= 0 || shape.num_blocks <= 0) throw Error("KV cache shape is empty");
  // The pools are counted in floats: a 16-bit cache takes half as many, a q8
  // one 34/128 as many (whole rows of blocks: every slot's row starts on a
  // block, at an even offset, BlockQ8's alignment).
  const size_t slots = static_cast<size_t>(shape.num_blocks) * shape.block_size;
  const size_t per_layer = (slots * size_t(shape.bytes_per_row()) + 3) / 4;
  // The new pools are reserved before the old ones are released: a size the
  // machine refuses leaves the cache as it was (its contents included).
  std::vector<AnonymousMemory> k, v;
  for (int l = 0; l < cfg.n_layer; ++l) {
    k.emplace_back(per_layer, "KV cache", AnonymousMemory::Pages::kSmall);
    v.emplace_back(per_layer, "KV cache", AnonymousMemory::Pages::kSmall);
  }
  k_pool_.swap(k);
  v_pool_.swap(v);
  shape_ = shape;
}

void CpuBackend::copy_blocks(const std::vector<BlockCopy>& copies) {
  const size_t row = row_bytes();
  for (const BlockCopy& cp : copies) {
    const size_t src = static_cast<size_t>(cp.src_block) * shape_.block_size * row;
    const size_t dst = static_cast<size_t>(cp.dst_block) * shape_.block_size * row;
    const size_t n = static_cast<size_t>(cp.num_slots) * row;
    for (size_t l = 0; l < k_pool_.size(); ++l) {
      std::memcpy(k_bytes(l) + dst, k_bytes(l) + src, n);
      std::memcpy(v_bytes(l) + dst, v_bytes(l) + src, n);
    }
  }
}

void CpuBackend::move_slots(const std::vector<SlotMove>& moves) {
  const size_t row = row_bytes();
  const long long slots = static_cast<long long>(shape_.num_blocks) * shape_.block_size;
  for (const SlotMove& m : moves)
    if (m.src_slot < 0 || m.dst_slot < 0 || m.src_slot >= slots || m.dst_slot >= slots)
      throw Error("move_slots: slot outside the KV pool");
  for (const SlotMove& m : moves)
    for (size_t l = 0; l < k_pool_.size(); ++l) {
      std::memmove(k_bytes(l) + m.dst_slot * row, k_bytes(l) + m.src_slot * row, row);
      std::memmove(v_bytes(l) + m.dst_slot * row, v_bytes(l) + m.src_slot * row, row);
    }
}

BackendMemory CpuBackend::memory() const {
  BackendMemory m;
  m.where = "host RAM";
  m.on_host = true;
  for (size_t l = 0; l < k_pool_.size(); ++l) {
    m.kv_pools.push_back({k_pool_[l].data(), k_pool_[l].bytes()});
    m.kv_pools.push_back({v_pool_[l].data(), v_pool_[l].bytes()});
    m.kv_reserved_bytes += static_cast<int64_t>(k_pool_[l].bytes() + v_pool_[l].bytes());
  }
  m.scratch_last_bytes = scratch_last_;
  m.scratch_peak_bytes = scratch_peak_;
  m.total_bytes = physical_memory_bytes();
  m.free_bytes = available_memory_bytes();
  return m;
}

HardwareRoofs CpuBackend::measure_roofs(int cpu_threads, double working_set_bytes) const {
  HardwareRoofs roofs;
  const int threads = cpu_threads > 0
                          ? cpu_threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  constexpr long long kMainMemoryProbe = 256ll << 20;
  const cpu::MachineRoofs m = cpu::measure_machine(threads, kMainMemoryProbe);
  if (working_set_bytes > 0 && working_set_bytes * 4 < kMainMemoryProbe) {
    roofs.working_set_bytes = working_set_bytes;
    roofs.working_set_bandwidth =
        cpu::measure_read_bandwidth(static_cast<long long>(working_set_bytes), threads);
  }
  roofs.peak_flops = m.peak_flops;
  roofs.bandwidth = m.read_bandwidth;
  roofs.threads = m.threads;
  roofs.how = "measured at start-up on " + std::to_string(m.threads) +
              " CPU threads: independent FMA chains, streaming read of 256 MB";
  return roofs;
}

double CpuBackend::measure_bandwidth(int cpu_threads) const {
  return cpu::measure_read_bandwidth(512ll << 20, cpu_threads);
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const ModelWeights> weights,
                                          int threads) {
  if (!weights) throw Error("cpu backend: no weights");
  return std::make_unique<CpuBackend>(std::move(weights), threads);
}

}  // namespace ts
