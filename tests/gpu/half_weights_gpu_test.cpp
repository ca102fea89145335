// The CUDA backend on bf16 and f16 weights: the 16-bit kernels
// (kernels/matmul_half.cu) against an exact sum and the CPU's kernels in the
// same format, and whole forwards against the CPU backend on the same
// converted weights. Needs a GPU (skipped with the reason otherwise).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/embedding.h"
#include "engine/cpu/matmul.h"
#include "engine/engine.h"
#include "model/half_float.h"
#include "model/model_loader.h"
#include "test_paths.h"
#include "util/error.h"
#include "util/thread_pool.h"
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

// Weights in a 16-bit format: the stored bits and the fp32 values they hold.
struct HalfMatrix {
  std::vector<uint16_t> bits;
  std::vector<float> values;
};
HalfMatrix half_matrix(size_t n, bool bf16, std::mt19937& rng) {
  HalfMatrix h;
  for (float v : random_vector(n, rng, 0.05f)) {
    h.bits.push_back(bf16 ? fp32_to_bf16(v) : fp32_to_fp16(v));
    h.values.push_back(bf16 ? bf16_to_fp32(h.bits.back()) : fp16_to_fp32(h.bits.back()));
  }
  return h;
}

// gamma(k) = k u / (1 - k u), u = 2^-24: an fp32 sum of k products, in any
// order, with or without fused multiply-adds, is within gamma(k) sum|terms|
// of the exact sum (Higham, Accuracy and Stability, 3.1).
double gamma_k(int k) {
  const double u = std::ldexp(1.0, -24);
  return k * u / (1 - k * u);
}

// The exact sums of the products x[r][i] * w(i, j) (double: exact enough
// for these sizes) and the sums of their absolute values.
struct Exact {
  std::vector<double> sum, abs_sum;
};
template <typename Index>
Exact exact_products(const std::vector<float>& x, const std::vector<float>& w, int m, int k, int n,
                     Index at) {
  Exact e{std::vector<double>(size_t(m) * n), std::vector<double>(size_t(m) * n)};
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < k; ++i) {
        const double t = double(x[size_t(r) * k + i]) * w[size_t(at(i, j))];
        e.sum[size_t(r) * n + j] += t;
        e.abs_sum[size_t(r) * n + j] += std::fabs(t);
      }
  return e;
}

// Every output of `got` and of the CPU's `cpu` within gamma(k) of its
// terms' absolute sum from the exact sum.
void expect_within_sum_bound(const std::vector<float>& got, const std::vector<float>& cpu,
                             const Exact& e, int k, const std::string& what) {
  ASSERT_EQ(got.size(), e.sum.size()) << what;
  ASSERT_EQ(cpu.size(), e.sum.size()) << what;
  int bad_gpu = 0, bad_cpu = 0;
  for (size_t i = 0; i < e.sum.size(); ++i) {
    const double bound = gamma_k(k) * e.abs_sum[i];
    // Written so that a NaN counts as outside.
    bad_gpu += !(std::fabs(got[i] - e.sum[i]) <= bound);
    bad_cpu += !(std::fabs(cpu[i] - e.sum[i]) <= bound);
  }
  EXPECT_EQ(bad_gpu, 0) << what << ": GPU outputs beyond gamma(k) sum|terms|";
  EXPECT_EQ(bad_cpu, 0) << what << ": CPU outputs beyond gamma(k) sum|terms|";
}

// Rows of x computed alone (`alone(row)`) give the bits they have in `all`,
// computed among m rows: the first and last of the first tile of 8 rows,
// the first of the second, one in the middle and the last.
template <typename Alone>
void expect_rows_alone_equal(const std::vector<float>& x, int m, int k, int n,
                             const std::vector<float>& all, Alone alone, const std::string& what) {
  for (int r : {0, 7, 8, m / 2, m - 1}) {
    if (r >= m) continue;
    const std::vector<float> row(x.begin() + size_t(r) * k, x.begin() + size_t(r + 1) * k);
    const std::vector<float> one = alone(row);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin() + size_t(r) * n))
        << what << ": row " << r << " alone differs from the same row among " << m;
  }
}

// y = x . w (w [k][n]) and y = x . b^T (b [n][k]) for odd and even widths,
// one row and many, k from 5 to 3072: the products are the widened weights'
// (the CPU's), the sums within the fp32 bound of the exact ones, and every
// row's bits the same whether it is computed alone or among up to 37 others,
// and whether k's splits run in blocks of their own or in turn.
TEST(HalfKernels, MatmulsAreTheCpusProductsWithinTheSumBoundAndFreeOfTheRowCount) {
  TS_REQUIRE_CUDA();
  std::mt19937 rng(23);
  ThreadPool pool(2);
  struct Shape {
    int m, k, n;
  };
  for (bool bf16 : {true, false}) {
    const WeightFormat format = bf16 ? WeightFormat::kBF16 : WeightFormat::kF16;
    // GPT-2's decode shapes; k of one split (64, 65: under 8 runs of 32) and
    // of several (300: 2, 777: 4, 3072: 12); odd n and k; k under a run (5).
    for (const Shape s :
         {Shape{1, 768, 2304}, Shape{5, 768, 768}, Shape{37, 300, 130}, Shape{3, 65, 77},
          Shape{17, 3072, 768}, Shape{9, 64, 50}, Shape{19, 777, 33}, Shape{2, 5, 7}}) {
      const std::string what = std::string(bf16 ? "bf16 " : "f16 ") + std::to_string(s.m) + "x" +
                               std::to_string(s.k) + "x" + std::to_string(s.n);
      const auto x = random_vector(static_cast<size_t>(s.m) * s.k, rng);
      const HalfMatrix w = half_matrix(static_cast<size_t>(s.k) * s.n, bf16, rng);
      // x . w: weight (i, j) at i * n + j.
      Exact e =
          exact_products(x, w.values, s.m, s.k, s.n, [&](int i, int j) { return i * s.n + j; });
      std::vector<float> cpu(e.sum.size());
      cpu::matmul(x.data(), s.m, s.k, MatrixView{w.bits.data(), format}, s.n, nullptr, cpu.data(),
                  pool);
      // k's splits in blocks of their own (a decode step's way), then one
      // block running them in turn (a prefill's): the same bits.
      const auto got = cuda_check::matmul_half(x, s.m, s.k, w.bits, bf16, s.n, true);
      expect_within_sum_bound(got, cpu, e, s.k, what + " x.w");
      const auto whole = cuda_check::matmul_half(x, s.m, s.k, w.bits, bf16, s.n, false);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), whole.begin(), whole.end()))
          << what << ": split and whole differ";
      expect_rows_alone_equal(
          x, s.m, s.k, s.n, whole,
          [&](const std::vector<float>& row) {
            return cuda_check::matmul_half(row, 1, s.k, w.bits, bf16, s.n, true);
          },
          what + " x.w");
      // x . b^T, b [n][k]: the same values read as n rows of k.
      e = exact_products(x, w.values, s.m, s.k, s.n, [&](int i, int j) { return j * s.k + i; });
      cpu::matmul_transposed(x.data(), s.m, s.k, MatrixView{w.bits.data(), format}, s.n, cpu.data(),
                             pool);
      const auto got_t = cuda_check::matmul_half_transposed(x, s.m, s.k, w.bits, bf16, s.n);
      expect_within_sum_bound(got_t, cpu, e, s.k, what + " x.b^T");
      expect_rows_alone_equal(
          x, s.m, s.k, s.n, got_t,
          [&](const std::vector<float>& row) {
            return cuda_check::matmul_half_transposed(row, 1, s.k, w.bits, bf16, s.n);
          },
          what + " x.b^T");
    }
  }
}

// More row tiles than a grid's y dimension holds (65,535 tiles of 8 rows):
// the blocks loop over them, and the last rows are computed like the first.
TEST(HalfKernels, MatmulsHandleMoreRowTilesThanAGridDimensionHolds) {
  TS_REQUIRE_CUDA();
  std::mt19937 rng(31);
  const int m = 8 * 65535 + 11, k = 8, n = 3;
  const auto x = random_vector(static_cast<size_t>(m) * k, rng);
  const HalfMatrix w = half_matrix(static_cast<size_t>(k) * n, true, rng);
  const auto got = cuda_check::matmul_half(x, m, k, w.bits, true, n, false);
  const auto got_t = cuda_check::matmul_half_transposed(x, m, k, w.bits, true, n);
  for (int r : {0, 7, 8 * 65535 - 1, 8 * 65535, m - 1})
    for (int j = 0; j < n; ++j) {
      double want = 0, want_t = 0, scale = 0;
      for (int i = 0; i < k; ++i) {
        want += double(x[size_t(r) * k + i]) * w.values[size_t(i) * n + j];
        want_t += double(x[size_t(r) * k + i]) * w.values[size_t(j) * k + i];
        scale += std::fabs(double(x[size_t(r) * k + i]));
      }
      EXPECT_NEAR(got[size_t(r) * n + j], want, 1e-5 * scale) << "row " << r;
      EXPECT_NEAR(got_t[size_t(r) * n + j], want_t, 1e-5 * scale) << "row " << r;
    }
}

// The embedding widens each stored value exactly, as the CPU's does.
TEST(HalfKernels, EmbeddingEqualsTheCpusBitForBit) {
  TS_REQUIRE_CUDA();
  std::mt19937 rng(29);
  const int vocab = 50, n_ctx = 40;
  for (bool bf16 : {true, false}) {
    for (int c : {64, 768, 300}) {
      const HalfMatrix wte = half_matrix(static_cast<size_t>(vocab) * c, bf16, rng);
      const auto wpe = random_vector(static_cast<size_t>(n_ctx) * c, rng);
      const std::vector<int> tok = {3, 49, 0, 7, 7}, pos = {0, 1, 2, 39, 5};
      std::vector<float> want(tok.size() * c);
      cpu::embed(MatrixView{wte.bits.data(), bf16 ? WeightFormat::kBF16 : WeightFormat::kF16},
                 wpe.data(), tok.data(), pos.data(), static_cast<int>(tok.size()), c, want.data());
      EXPECT_EQ(max_abs_diff(cuda_check::embed_half(wte.bits, bf16, wpe, tok, pos, c), want), 0.0f)
          << (bf16 ? "bf16 " : "f16 ") << c;
    }
  }
}

// The same converted weights on both backends: prefill (tile and row
// attention kernels) and graph-replayed decode steps of two lanes, traced,
// for GPT-2 (the tiny fixture) and a GQA Llama with an untied lm_head. The
// tolerances are the f32 parity tests' (tests/gpu/cuda_backend_test.cpp,
// llama_gpu_test.cpp): the weights are the same values on both sides, only
// the sums' order differs, as it does in f32. The device holds the matrices
// in two bytes a value.
TEST(HalfCuda, ForwardMatchesTheCpuOnTheSameConvertedWeights) {
  TS_REQUIRE_CUDA();
  struct Model {
    std::filesystem::path dir;
    float tol;
  };
  for (const Model& m : {Model{test::tiny_model_dir(), 1e-3f},
                         Model{test::fixture_dir() / "llama" / "llama-gqa2", 1e-4f}}) {
    const ModelWeights f32 = load_model(m.dir);
    for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kF16}) {
      const std::string name = m.dir.filename().string() + " " + weight_format_name(f);
      auto w = std::make_shared<const ModelWeights>(convert_weights(f32, f));
      auto w32 = std::make_shared<const ModelWeights>(f32);
      Engine gpu(w, cuda_backend(w), 64 * 8);
      Engine cpu(w, make_cpu_backend(w, 2), 64 * 8);
      {
        Engine gpu32(w32, cuda_backend(w32), 64 * 8);
        const double ratio = double(gpu.backend().memory().weight_copy_bytes) /
                             double(gpu32.backend().memory().weight_copy_bytes);
        // Matrices halve; norms, biases and wpe stay fp32.
        EXPECT_GT(ratio, 0.45) << name;
        EXPECT_LT(ratio, 0.75) << name;
        EXPECT_NE(gpu.backend().device_name().find(weight_format_name(f)), std::string::npos)
            << gpu.backend().device_name();
      }
      gpu_test::expect_prefill_and_decode_match(gpu, cpu, m.tol, name);
    }
  }
}

#else

TEST(HalfKernels, MatmulsAreTheCpusProductsWithinTheSumBoundAndFreeOfTheRowCount) {
  GTEST_SKIP() << "this build has no CUDA backend";
}

#endif

}  // namespace
}  // namespace ts
