#pragma once
// Helpers the GPU tests share: differences, random data, a CUDA backend that
// must exist, and the comparison of one entry's outputs on two backends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/engine.h"
#include "model/weights.h"
#include "util/error.h"
#ifdef TS_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

namespace ts::gpu_test {

// Infinity where a difference is not a number (a NaN on one side, or
// infinities of opposite signs): std::max would let a NaN pass as 0.
inline float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (a[i] == b[i]) continue;  // equal infinities too
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= std::numeric_limits<float>::max())) return std::numeric_limits<float>::infinity();
    m = std::max(m, d);
  }
  return m;
}
inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<float>::infinity();
  return max_abs_diff(a.data(), b.data(), a.size());
}

inline std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Logits and residuals within logit_tol, every recorded attention layer
// within attn_tol.
inline void expect_same_outputs(const EntryOutput& gpu, const EntryOutput& cpu, float logit_tol,
                                float attn_tol, const std::string& where) {
  ASSERT_EQ(gpu.logit_rows, cpu.logit_rows) << where;
  EXPECT_LE(max_abs_diff(gpu.logits, cpu.logits), logit_tol) << where << ": logits";
  ASSERT_EQ(gpu.attention.size(), cpu.attention.size()) << where;
  for (size_t l = 0; l < cpu.attention.size(); ++l)
    EXPECT_LE(max_abs_diff(gpu.attention[l], cpu.attention[l]), attn_tol)
        << where << ": layer " << l;
  EXPECT_LE(max_abs_diff(gpu.residuals, cpu.residuals), logit_tol) << where << ": residuals";
}

// The same work on two engines of one model: prompts of 5 and 13 tokens
// (attention's row and tile kernels), then six cached decode steps of two
// lanes sharing the prompt (every other one traced; graph-replayed on the
// GPU). Logits and residuals within logit_tol, attention within 1e-4.
inline void expect_prefill_and_decode_match(Engine& gpu, Engine& cpu, float logit_tol,
                                            const std::string& name) {
  ForwardOptions trace;
  trace.record_attention = true;
  trace.record_residuals = true;
  std::mt19937 rng(3);
  const int v = cpu.config().vocab_size;
  for (int n : {5, 13}) {
    std::vector<int> ids(n);
    for (int& t : ids) t = static_cast<int>(rng() % v);
    const SeqId gs = gpu.cache().create(), cs = cpu.cache().create();
    expect_same_outputs(gpu.forward({{gs, ids}}, trace).outputs[0],
                        cpu.forward({{cs, ids}}, trace).outputs[0], logit_tol, 1e-4f,
                        name + " prefill " + std::to_string(n));
    std::vector<SeqId> gl = {gs, gpu.cache().fork(gs)}, cl = {cs, cpu.cache().fork(cs)};
    for (int step = 0; step < 6; ++step) {
      std::vector<ForwardRequest> gr, cr;
      for (int i = 0; i < 2; ++i) {
        const int t = static_cast<int>(rng() % v);
        gr.push_back({gl[i], {t}});
        cr.push_back({cl[i], {t}});
      }
      const ForwardOptions& o = step % 2 ? trace : ForwardOptions{};
      const ForwardResult g = gpu.forward(gr, o), c = cpu.forward(cr, o);
      for (int i = 0; i < 2; ++i)
        expect_same_outputs(g.outputs[i], c.outputs[i], logit_tol, 1e-4f,
                            name + " prompt " + std::to_string(n) + " step " +
                                std::to_string(step) + " lane " + std::to_string(i));
    }
    for (SeqId s : gl) gpu.cache().release(s);
    for (SeqId s : cl) cpu.cache().release(s);
  }
}

#ifdef TS_HAVE_CUDA
// On a machine with a device: the backend, or an error naming why not.
inline std::unique_ptr<Backend> cuda_backend(std::shared_ptr<const ModelWeights> w) {
  std::string why;
  auto b = make_cuda_backend(std::move(w), &why);
  if (!b) throw Error("make_cuda_backend failed on a machine with a device: " + why);
  return b;
}
#endif

}  // namespace ts::gpu_test
