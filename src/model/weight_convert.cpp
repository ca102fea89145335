// convert_weights (model_loader.h): the matmul weights into a 16-bit or
// block format (weight_format.h), once, at load.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model/half_float.h"
#include "model/model_loader.h"
#include "util/anonymous_memory.h"
#include "util/error.h"

namespace ts {
namespace {

struct Small {  // an fp32 tensor copied as it is
  const float** ptr;
  size_t count;
};
// A checkpoint tensor within a fused matrix (the Llama family's): columns
// [col0, col1) of the stored [in, out] matrix are that tensor, which the
// checkpoint holds transposed ([out, in]).
struct Part {
  std::string name;
  size_t col0, col1;
};
struct Matrix {      // an fp32 matrix stored in the chosen format
  std::string name;  // the checkpoint's tensor (GPT-2, embeddings) or the fused matrix's
  const float** f32;
  const void** packed;
  size_t count;
  size_t row;               // values per row of the [in, out] matrix (out), or of wte (C)
  std::vector<Part> parts;  // empty: name is the checkpoint's tensor, stored as it is
  // A layer matrix [in, out] in a block format: stored transposed, [out, in],
  // its blocks along in (the integer kernel's dot products, matmul_blocks.h).
  bool transposed = false;
  size_t stored_row() const { return transposed ? count / row : row; }
};

// The checkpoint's names for a matrix, for errors: a Llama layer's q, k and v
// projections are one fused matrix here, but three tensors in the file.
std::string tensor_names(const Matrix& m) {
  if (m.parts.empty()) return "tensor " + m.name;
  if (m.parts.size() == 1) return "tensor " + m.parts[0].name;
  std::string s = "tensors ";
  for (size_t i = 0; i < m.parts.size(); ++i)
    s += (i == 0 ? "" : i + 1 == m.parts.size() ? " and " : ", ") + m.parts[i].name;
  return s + ", stored as one matrix,";
}

// Where stored value `index` of a matrix is in the checkpoint: "tensor NAME
// at index I" (stored as the file has it) or "tensor NAME at [out, in]".
std::string where(const Matrix& m, size_t index) {
  if (const size_t in = m.stored_row(); m.transposed && in > 0)
    index = index % in * m.row + index / in;
  const size_t r = index / m.row, c = index % m.row;
  for (const Part& p : m.parts)
    if (c >= p.col0 && c < p.col1)
      return "tensor " + p.name + " at [" + std::to_string(c - p.col0) + ", " + std::to_string(r) +
             "]";
  return "tensor " + m.name + " at index " + std::to_string(index);
}

constexpr size_t kAlignFloats = 16;  // 64 bytes
size_t aligned(size_t floats) { return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

// The matrix in q8 / q4 blocks at dst; a block whose scale f16 cannot hold
// is refused naming the tensor.
void encode_blocks(const std::string& file, const Matrix& m, WeightFormat format, void* dst) {
  std::vector<float> transposed;
  const float* src = *m.f32;
  if (m.transposed) {
    const size_t in = m.count / m.row;
    transposed.resize(m.count);
    for (size_t i = 0; i < in; ++i)
      for (size_t j = 0; j < m.row; ++j) transposed[j * in + i] = src[i * m.row + j];
    src = transposed.data();
  }
  size_t bad = 0;
  const bool ok = format == WeightFormat::kQ8
                      ? quantise_q8(src, m.count, static_cast<BlockQ8*>(dst), &bad)
                      : quantise_q4(src, m.count, static_cast<BlockQ4*>(dst), &bad);
  if (!ok)
    throw Error(file + ": the block of 32 values from " + where(m, bad * kQuantBlock) + " has a " +
                weight_format_name(format) +
                " scale that f16 cannot hold; load it with --weights bf16 or f32");
}

void encode(const std::string& file, const Matrix& m, WeightFormat format, void* out) {
  if (is_block_format(format)) return encode_blocks(file, m, format, out);
  auto* dst = static_cast<uint16_t*>(out);
  const float* src = *m.f32;
  if (format == WeightFormat::kBF16) {
    for (size_t i = 0; i < m.count; ++i) dst[i] = fp32_to_bf16(src[i]);
    return;
  }
  for (size_t i = 0; i < m.count; ++i) {
    dst[i] = fp32_to_fp16(src[i]);
    if ((dst[i] & 0x7C00u) == 0x7C00u && std::isfinite(src[i]))
      throw Error(file + ": " + where(m, i) + " holds " + std::to_string(src[i]) +
                  ", beyond f16's range (65504); load it with --weights bf16 or f32");
  }
}

}  // namespace

ModelWeights convert_weights(ModelWeights w, WeightFormat format) {
  if (w.format != WeightFormat::kF32)
    throw Error(w.source + ": weights already stored as " + weight_format_name(w.format));
  if (format == WeightFormat::kF32) return w;
  const ModelConfig& c = w.config;
  const size_t C = static_cast<size_t>(c.n_embd), Q = c.q_dim(), QKV = c.qkv_dim(), FC = c.fc_dim(),
               I = c.mlp_dim(), V = static_cast<size_t>(c.vocab_size);
  // Null tensors (the Llama family's wpe and biases) are left null.
  std::vector<Small> small = {
      {&w.wpe, static_cast<size_t>(c.n_ctx) * C}, {&w.ln_f_weight, C}, {&w.ln_f_bias, C}};
  const bool gpt2 = c.is_gpt2();
  std::vector<Matrix> matrices = {
      {gpt2 ? "wte.weight" : "model.embed_tokens.weight", &w.wte, &w.wte_packed, V * C, C, {}}};
  if (w.lm_head)
    matrices.push_back({"lm_head.weight", &w.lm_head, &w.lm_head_packed, V * C, C, {}});
  for (size_t l = 0; l < w.layers.size(); ++l) {
    LayerWeights& L = w.layers[l];
    const std::string h = "h." + std::to_string(l) + ".";
    for (const float** p : {&L.ln_1_weight, &L.ln_1_bias, &L.attn_proj_bias, &L.ln_2_weight,
                            &L.ln_2_bias, &L.mlp_proj_bias})
      small.push_back({p, C});
    small.push_back({&L.attn_qkv_bias, QKV});
    small.push_back({&L.mlp_fc_bias, FC});
    Matrix qkv{h + "attn.c_attn.weight", &L.attn_qkv_weight, &L.attn_qkv_packed, QKV * C, QKV, {}};
    Matrix proj{h + "attn.c_proj.weight", &L.attn_proj_weight, &L.attn_proj_packed, Q * C, C, {}};
    Matrix fc{h + "mlp.c_fc.weight", &L.mlp_fc_weight, &L.mlp_fc_packed, FC * C, FC, {}};
    Matrix down{h + "mlp.c_proj.weight", &L.mlp_proj_weight, &L.mlp_proj_packed, I * C, C, {}};
    if (!gpt2) {
      // The Llama loader's fused layout (llama_loader.cpp): q | k | v, gate | up.
      const std::string p = "model.layers." + std::to_string(l) + ".";
      const size_t KV = c.kv_dim();
      qkv.parts = {{p + "self_attn.q_proj.weight", 0, Q},
                   {p + "self_attn.k_proj.weight", Q, Q + KV},
                   {p + "self_attn.v_proj.weight", Q + KV, QKV}};
      proj.parts = {{p + "self_attn.o_proj.weight", 0, C}};
      fc.parts = {{p + "mlp.gate_proj.weight", 0, I}, {p + "mlp.up_proj.weight", I, FC}};
      down.parts = {{p + "mlp.down_proj.weight", 0, C}};
    }
    for (Matrix* m : {&qkv, &proj, &fc, &down}) {
      m->transposed = is_block_format(format);
      matrices.push_back(std::move(*m));
    }
  }
  std::erase_if(small, [](const Small& s) { return *s.ptr == nullptr; });
  if (is_block_format(format))
    for (const Matrix& m : matrices)
      if (m.stored_row() % kQuantBlock != 0)
        throw Error(w.source + ": " + tensor_names(m) + (m.parts.size() > 1 ? " have" : " has") +
                    (m.transposed ? " " + std::to_string(m.stored_row()) + " inputs per output"
                                  : " rows of " + std::to_string(m.row) + " values") +
                    ", not a multiple of 32, which --weights " + weight_format_name(format) +
                    " needs; load it with --weights f16, bf16 or f32");
  // A matrix's room, in floats.
  const auto room = [format](const Matrix& m) {
    return aligned((stored_bytes(format, m.count) + sizeof(float) - 1) / sizeof(float));
  };
  size_t total = 0;
  for (const Small& s : small) total += aligned(s.count);
  for (const Matrix& m : matrices) total += room(m);
  auto buffer = std::make_shared<AnonymousMemory>(total, "weights", AnonymousMemory::Pages::kHuge);
  float* at = buffer->data();
  for (const Small& s : small) {
    std::memcpy(at, *s.ptr, s.count * sizeof(float));
    *s.ptr = at;
    at += aligned(s.count);
  }
  for (const Matrix& m : matrices) {
    encode(w.source, m, format, at);
    *m.packed = at;
    *m.f32 = nullptr;
    at += room(m);
  }
  w.format = format;
  w.storage = std::move(buffer);  // the fp32 copy (or file map) goes here
  return w;
}

}  // namespace ts
