// The CUDA forward of the Llama family against the CPU backend, and its
// kernels (rmsnorm, rope, swiglu) against their CPU twins. Needs a GPU
// (skipped with the reason otherwise).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/rmsnorm.h"
#include "engine/cpu/rope.h"
#include "engine/cpu/swiglu.h"
#include "engine/engine.h"
#include "model/model_loader.h"
#include "test_paths.h"
#include "util/error.h"
#ifdef TS_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#include "kernel_harness.h"
#include "require_cuda.h"
#endif
#include "gpu_test_util.h"

namespace ts {
namespace {

#ifdef TS_HAVE_CUDA

using gpu_test::cuda_backend;
using gpu_test::max_abs_diff;
using gpu_test::random_vector;

TEST(LlamaKernels, RmsnormRopeAndSwigluMatchTheirCpuTwins) {
  TS_REQUIRE_CUDA();
  std::mt19937 rng(17);
  const int rows = 5;
  for (int c : {32, 48, 896, 300}) {
    const auto x = random_vector(static_cast<size_t>(rows) * c, rng, 3.0f);
    const auto w = random_vector(c, rng);
    std::vector<float> want(x.size());
    cpu::rmsnorm(x.data(), w.data(), rows, c, 1e-6f, want.data());
    EXPECT_LE(max_abs_diff(cuda_check::rmsnorm(x, w, rows, c, 1e-6f), want), 1e-5f) << c;

    const auto y = random_vector(x.size(), rng);
    std::vector<float> x_gpu = x, x_cpu = x;
    cpu::residual_rmsnorm(x_cpu.data(), y.data(), w.data(), rows, c, 1e-6f, want.data());
    const auto got = cuda_check::residual_rmsnorm(x_gpu, y, w, rows, c, 1e-6f);
    EXPECT_EQ(max_abs_diff(x_gpu, x_cpu), 0.0f) << c;
    EXPECT_LE(max_abs_diff(got, want), 1e-5f) << c;
  }
  // RoPE over q | k | v with GQA head counts, head sizes of 6 (not a
  // multiple of 4), 8 and 128, large thetas and positions, with and without
  // Qwen2's bias (the CPU matmul adds it before its rope).
  struct Case {
    int n_head, n_kv_head, head_dim;
    float theta;
    bool bias;
  };
  for (const Case k : {Case{4, 2, 8, 10000.0f, false}, Case{8, 2, 6, 500000.0f, true},
                       Case{4, 4, 128, 1000000.0f, true}, Case{6, 3, 8, 10000.0f, true}}) {
    const int ld = (k.n_head + 2 * k.n_kv_head) * k.head_dim;
    const std::vector<int> pos = {0, 1, 63, 4000, 7};
    const auto qkv = random_vector(static_cast<size_t>(rows) * ld, rng);
    const auto bias = k.bias ? random_vector(ld, rng) : std::vector<float>{};
    std::vector<float> want = qkv;
    if (k.bias)
      for (int r = 0; r < rows; ++r)
        for (int i = 0; i < ld; ++i) want[static_cast<size_t>(r) * ld + i] += bias[i];
    cpu::rope(want.data(), ld, pos.data(), rows, k.n_head, k.n_kv_head, k.head_dim, k.theta);
    const auto got =
        cuda_check::rope(qkv, ld, bias, pos, k.n_head, k.n_kv_head, k.head_dim, k.theta);
    // |v| <= ~10: 4e-6 is a few ulps (the angles are the same doubles on both sides).
    EXPECT_LE(max_abs_diff(got, want), 4e-6f) << k.head_dim << " theta " << k.theta;
  }
  for (int n : {56, 80, 4864, 301}) {
    const auto gate_up = random_vector(static_cast<size_t>(rows) * 2 * n, rng, 2.0f);
    std::vector<float> want(static_cast<size_t>(rows) * n);
    cpu::swiglu(gate_up.data(), rows, n, want.data());
    // |out| <= ~60: 1e-5 allows CUDA's expf (2 ulps) against the CPU's.
    EXPECT_LE(max_abs_diff(cuda_check::swiglu(gate_up, rows, n), want), 1e-5f) << n;
  }
}

std::shared_ptr<const ModelWeights> fixture(const std::string& name) {
  return std::make_shared<const ModelWeights>(load_model(test::fixture_dir() / "llama" / name));
}

// Prefill (the tile kernel for 13 rows, the row kernel for 5) and cached
// decode steps of two lanes sharing the prompt (graph-replayed), traced, on
// GQA with 2 and 4 query heads per KV head (one of head size 6 and theta
// 500000, untied and tied lm_head) and Qwen2's MHA with q/k/v biases.
TEST(LlamaCuda, ForwardMatchesTheCpuInPrefillAndCachedDecode) {
  TS_REQUIRE_CUDA();
  for (const char* name : {"llama-gqa2", "llama-gqa4-theta", "qwen2-mha"}) {
    auto w = fixture(name);
    Engine gpu(w, cuda_backend(w), 64 * 8);
    Engine cpu(w, make_cpu_backend(w, 2), 64 * 8);
    gpu_test::expect_prefill_and_decode_match(gpu, cpu, 1e-4f, name);
  }
}

#else

TEST(LlamaCuda, ForwardMatchesTheCpuInPrefillAndCachedDecode) {
  GTEST_SKIP() << "this build has no CUDA backend";
}

#endif

}  // namespace
}  // namespace ts
