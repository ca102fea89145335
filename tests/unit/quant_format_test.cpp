// Weights in the block formats q8 and q4 (--weights, weight_format.h): the
// quantiser's per-block bound, the conversion at load, the CPU's integer
// block kernel (AVX2 and scalar) against its definition and the fp32
// product on the dequantised weights, and the bundled model under each
// format against fp32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_blocks.h"
#include "exported_model_checks.h"
#include "model/half_float.h"
#include "model/model_loader.h"
#include "model/weight_format.h"
#include "session/evaluate.h"
#include "session/memory_report.h"
#include "session/model_setup.h"
#include "session/session.h"
#include "test_model_writer.h"
#include "test_models.h"
#include "test_paths.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace ts {
namespace {

constexpr WeightFormat kBlockFormats[] = {WeightFormat::kQ8, WeightFormat::kQ4};
constexpr double kU = 0x1p-24;  // fp32's unit roundoff

// The largest code of a format: q = round(x / d) lies in -top..top.
int top_code(WeightFormat f) { return f == WeightFormat::kQ8 ? 127 : 7; }

// A quantised copy of `x` (a multiple of 32 values) as raw block bytes.
std::vector<unsigned char> quantise(const std::vector<float>& x, WeightFormat f) {
  std::vector<unsigned char> bytes(stored_bytes(f, x.size()));
  const bool ok = f == WeightFormat::kQ8
                      ? quantise_q8(x.data(), x.size(), reinterpret_cast<BlockQ8*>(bytes.data()))
                      : quantise_q4(x.data(), x.size(), reinterpret_cast<BlockQ4*>(bytes.data()));
  EXPECT_TRUE(ok);
  return bytes;
}

std::vector<float> dequantise(const std::vector<unsigned char>& bytes, WeightFormat f, size_t n) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = dequantised_at(bytes.data(), f, i);
  return out;
}

// The f16 scale stored for block b.
float stored_scale(const std::vector<unsigned char>& bytes, WeightFormat f, size_t b) {
  uint16_t d;
  std::memcpy(&d, bytes.data() + b * stored_bytes(f, kQuantBlock), sizeof d);
  return fp16_to_fp32(d);
}

TEST(QuantFormat, NamesParseTheBytesCountScalesAndTheKvFlagRefusesQ4) {
  EXPECT_EQ(parse_weight_format("q8"), WeightFormat::kQ8);
  EXPECT_EQ(parse_weight_format("q4"), WeightFormat::kQ4);
  EXPECT_STREQ(weight_format_name(WeightFormat::kQ4), "q4");
  try {
    parse_kv_format("q4");
    FAIL() << "--kv q4 was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--kv: expected f32, f16, bf16 or q8, got 'q4'");
  }
  EXPECT_DOUBLE_EQ(bytes_per_value(WeightFormat::kQ8), 34.0 / 32);
  EXPECT_DOUBLE_EQ(bytes_per_value(WeightFormat::kQ4), 18.0 / 32);
  EXPECT_DOUBLE_EQ(bytes_per_value(WeightFormat::kF16), 2.0);
  EXPECT_EQ(stored_bytes(WeightFormat::kQ8, 96), 3u * 34);
  EXPECT_EQ(stored_bytes(WeightFormat::kQ4, 96), 3u * 18);
  EXPECT_EQ(stored_bytes(WeightFormat::kF32, 96), 384u);
}

// Blocks of every kind: ordinary, all zero, tiny (scale subnormal in f16), a
// lone outlier, exact halves of a step, negative extremes. Per block,
// computed here from the values alone: d is max|x| / top rounded up to an
// f16 (so no code is clamped), and every value reads back within d / 2.
TEST(QuantFormat, EveryValueRoundTripsWithinHalfItsBlocksScale) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x;
  for (float scale : {1.0f, 0.02f, 3e-6f, 1e-9f, 0.0f, 250.0f})
    for (int j = 0; j < kQuantBlock; ++j) x.push_back(scale * nd(rng));
  for (int j = 0; j < kQuantBlock; ++j) x.push_back(j == 7 ? -40.0f : 0.01f * nd(rng));
  for (int j = 0; j < kQuantBlock; ++j) x.push_back(float(j - 16) * 0.5f);  // halves of a step
  for (int j = 0; j < 64 * kQuantBlock; ++j) x.push_back(0.05f * nd(rng));
  for (WeightFormat f : kBlockFormats) {
    SCOPED_TRACE(weight_format_name(f));
    const int top = top_code(f);
    const std::vector<unsigned char> q = quantise(x, f);
    const std::vector<float> back = dequantise(q, f, x.size());
    double worst = 0;  // |x - back| / d
    for (size_t b = 0; b < x.size() / kQuantBlock; ++b) {
      double amax = 0;
      for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(double(x[b * 32 + j])));
      const double want = amax / top, d = stored_scale(q, f, b);
      EXPECT_GE(d, want) << "block " << b;
      // The next f16 up: 2^-10 relative in the normal range, 2^-24 apart below.
      EXPECT_LE(d, std::max(want * (1 + 0x1p-10), want + 0x1p-24)) << "block " << b;
      for (int j = 0; j < kQuantBlock; ++j) {
        const size_t i = b * kQuantBlock + j;
        const double err = std::fabs(double(x[i]) - back[i]);
        EXPECT_LE(err, d / 2) << "value " << i;
        // The value is an integer multiple of d within the format's codes.
        const double code = d > 0 ? back[i] / d : 0;
        EXPECT_EQ(code, std::round(code)) << i;
        EXPECT_LE(std::fabs(code), top) << i;
        if (d > 0) worst = std::max(worst, err / d);
      }
    }
    std::printf("%s: worst |x - deq(q(x))| = %.4f d\n", weight_format_name(f), worst);
  }
}

TEST(QuantFormat, AScaleBeyondF16IsRefusedAtTheBlock) {
  std::vector<float> x(3 * kQuantBlock, 0.5f);
  x[2 * kQuantBlock + 3] = 1e7f;  // q8: d = 1e7 / 127 > 65504
  std::vector<BlockQ8> q8(3);
  size_t bad = 99;
  EXPECT_FALSE(quantise_q8(x.data(), x.size(), q8.data(), &bad));
  EXPECT_EQ(bad, 2u);
  x[2 * kQuantBlock + 3] = 1e6f;  // q8 holds it (d = 7874), q4 does not (d = 142857)
  EXPECT_TRUE(quantise_q8(x.data(), x.size(), q8.data(), &bad));
  std::vector<BlockQ4> q4(3);
  EXPECT_FALSE(quantise_q4(x.data(), x.size(), q4.data(), &bad));
  x[5] = std::nanf("");
  EXPECT_FALSE(quantise_q8(x.data(), x.size(), q8.data(), &bad));
  EXPECT_EQ(bad, 0u);
}

// ---- kernels ----

struct Shape {
  int m, k, n;
};

// Puts the kernels back on their vector paths when a test ends, however it ends.
struct VectorPathsAfter {
  ~VectorPathsAfter() {
    cpu::force_scalar_half(false);
    cpu::allow_avxvnni(true);
  }
};

std::vector<float> gaussian(size_t n, float sd, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(n);
  for (float& f : v) f = nd(rng);
  return v;
}

// The integer block kernel (engine/cpu/matmul_blocks.h), recomputed here
// from its definition: each row of x quantised to q8 blocks with an fp32
// scale, exact int32 lane sums of four products, one fp32 FMA per block and
// lane, the lanes summed in the stated order, then the bias.
struct Definition {
  std::vector<float> dx;          // [m, k / 32]
  std::vector<int> qx;            // [m, k]
  std::vector<float> y;           // [m, n]
  std::vector<double> exact;      // the same sums in exact arithmetic (double)
  std::vector<double> magnitude;  // sum |dx dw p| + |bias|, for the fp32 bound
};

Definition definition(const std::vector<float>& x, int m, int k, const std::vector<float>& wdeq,
                      const std::vector<unsigned char>& q, WeightFormat f, int n,
                      const float* bias) {
  const int nb = k / kQuantBlock;
  Definition d;
  d.dx.resize(size_t(m) * nb);
  d.qx.resize(size_t(m) * k);
  for (int r = 0; r < m; ++r)
    for (int b = 0; b < nb; ++b) {
      const float* v = x.data() + size_t(r) * k + b * kQuantBlock;
      float amax = 0;
      for (int i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(v[i]));
      const float dx = amax / 127.0f;
      d.dx[size_t(r) * nb + b] = dx;
      for (int i = 0; i < kQuantBlock; ++i)
        d.qx[size_t(r) * k + b * kQuantBlock + i] = dx == 0 ? 0 : int(std::nearbyint(v[i] / dx));
    }
  d.y.resize(size_t(m) * n);
  d.exact.resize(d.y.size());
  d.magnitude.resize(d.y.size());
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j) {
      float acc[8] = {};
      double exact = 0, mag = 0;
      for (int b = 0; b < nb; ++b) {
        const float dw = stored_scale(q, f, size_t(j) * nb + b);
        const float dd = d.dx[size_t(r) * nb + b] * dw;
        for (int l = 0; l < 8; ++l) {
          int p = 0;
          for (int t = 0; t < 4; ++t) {
            const size_t i = size_t(b) * kQuantBlock + 4 * l + t;
            const float w = wdeq[size_t(j) * k + i];
            p += d.qx[size_t(r) * k + i] * (dw == 0 ? 0 : int(std::lround(w / dw)));
          }
          acc[l] = std::fma(dd, float(p), acc[l]);
          exact += double(d.dx[size_t(r) * nb + b]) * dw * p;
          mag += std::fabs(double(d.dx[size_t(r) * nb + b]) * dw * p);
        }
      }
      const float t0 = acc[0] + acc[4], t1 = acc[1] + acc[5], t2 = acc[2] + acc[6],
                  t3 = acc[3] + acc[7];
      float y = (t0 + t1) + (t2 + t3);
      if (bias) {
        y += bias[j];
        exact += bias[j];
        mag += std::fabs(bias[j]);
      }
      d.y[size_t(r) * n + j] = y;
      d.exact[size_t(r) * n + j] = exact;
      d.magnitude[size_t(r) * n + j] = mag;
    }
  return d;
}

// Y = X B^T (+ bias), B [n, k] in blocks along its rows: matmul_transposed,
// and matmul with B as a layer matrix's transposed storage. The shapes reach
// the four-row and one-row AVX2 steps, a prefill's many rows, and a block
// of zeros and an outlier in x. Three bounds, each derived:
//  * the AVX2, AVX-VNNI (where the CPU has it) and scalar paths equal the
//    definition above bit for bit;
//  * against the definition's sums in exact arithmetic, fp32 rounds each
//    scale product once and each lane's chain of nb FMAs once per step, then
//    4 additions (lanes, bias): within (nb + 6) u sum |terms|;
//  * against the plain product x . w on the dequantised weights (no
//    activation rounding), each x differs from dx qx by at most dx / 2
//    (plus the division's rounding, < 1e-4 dx): within
//    sum_b dx_b (0.5 + 1e-4) sum_i |w_i| plus the fp32 bound.
TEST(BlockKernels, MatmulsComputeTheIntegerDefinitionWithinDerivedBoundsOfTheFp32Product) {
  const VectorPathsAfter restore;
  std::mt19937 rng(23);
  ThreadPool pool(2);
  for (WeightFormat f : kBlockFormats)
    for (const Shape& s : {Shape{1, 32, 37}, Shape{1, 768, 301}, Shape{3, 96, 45}, Shape{6, 64, 13},
                           Shape{13, 256, 96}}) {
      SCOPED_TRACE(std::string(weight_format_name(f)) + " " + std::to_string(s.m) + "x" +
                   std::to_string(s.k) + "x" + std::to_string(s.n));
      std::vector<float> x = gaussian(size_t(s.m) * s.k, 1.0f, rng);
      std::fill(x.begin(), x.begin() + kQuantBlock, 0.0f);  // a block of zeros
      x.back() = 40.0f;                                     // an outlier
      const std::vector<float> w = gaussian(size_t(s.n) * s.k, 0.1f, rng);
      const std::vector<float> bias = gaussian(size_t(s.n), 0.1f, rng);
      const std::vector<unsigned char> q = quantise(w, f);
      const std::vector<float> deq = dequantise(q, f, w.size());
      const Definition want = definition(x, s.m, s.k, deq, q, f, s.n, bias.data());
      const size_t out = size_t(s.m) * s.n;
      std::vector<float> avx2(out), vnni(out), scalar(out), no_bias(out);
      cpu::force_scalar_half(false);
      cpu::allow_avxvnni(false);
      cpu::matmul(x.data(), s.m, s.k, MatrixView{q.data(), f}, s.n, bias.data(), avx2.data(), pool);
      cpu::matmul_transposed(x.data(), s.m, s.k, MatrixView{q.data(), f}, s.n, no_bias.data(),
                             pool);
      if (cpu::avxvnni_available()) {
        cpu::allow_avxvnni(true);
        ASSERT_STREQ(cpu::block_kernel(true), "avxvnni");
        cpu::matmul(x.data(), s.m, s.k, MatrixView{q.data(), f}, s.n, bias.data(), vnni.data(),
                    pool);
        EXPECT_EQ(vnni, want.y);
      }
      cpu::force_scalar_half(true);
      ASSERT_STREQ(cpu::half_kernel(), "scalar");
      cpu::matmul(x.data(), s.m, s.k, MatrixView{q.data(), f}, s.n, bias.data(), scalar.data(),
                  pool);
      EXPECT_EQ(avx2, want.y);
      EXPECT_EQ(scalar, want.y);
      const int nb = s.k / kQuantBlock;
      for (int r = 0; r < s.m; ++r)
        for (int j = 0; j < s.n; ++j) {
          const size_t i = size_t(r) * s.n + j;
          EXPECT_EQ(no_bias[i] + bias[j], avx2[i]) << r << "," << j;
          const double fp32_bound = (nb + 6) * kU * want.magnitude[i];
          EXPECT_LE(std::fabs(avx2[i] - want.exact[i]), fp32_bound) << r << "," << j;
          double plain = bias[j], rounding = 0;
          for (int b = 0; b < nb; ++b) {
            double wabs = 0;
            for (int t = 0; t < kQuantBlock; ++t) {
              const size_t kk = size_t(b) * kQuantBlock + t;
              plain += double(x[size_t(r) * s.k + kk]) * deq[size_t(j) * s.k + kk];
              wabs += std::fabs(deq[size_t(j) * s.k + kk]);
            }
            rounding += want.dx[size_t(r) * nb + b] * (0.5 + 1e-4) * wabs;
          }
          EXPECT_LE(std::fabs(avx2[i] - plain), rounding + fp32_bound) << r << "," << j;
        }
    }
}

// Every row is the same sum whichever call computes it: a decode step's one
// row equals the same row of a prefill, on one thread or two; NaN in x
// reaches its outputs and only those.
TEST(BlockKernels, ARowsOutputsDoNotDependOnTheOtherRowsOrTheThreads) {
  std::mt19937 rng(31);
  ThreadPool one(1), two(2);
  const int m = 9, k = 128, n = 70;
  for (WeightFormat f : kBlockFormats) {
    SCOPED_TRACE(weight_format_name(f));
    std::vector<float> x = gaussian(size_t(m) * k, 1.0f, rng);
    x[5 * k + 3] = std::nanf("");
    const std::vector<unsigned char> q = quantise(gaussian(size_t(n) * k, 0.1f, rng), f);
    std::vector<float> all(size_t(m) * n), all_one(all.size()), row(n);
    cpu::matmul(x.data(), m, k, MatrixView{q.data(), f}, n, nullptr, all.data(), two);
    cpu::matmul(x.data(), m, k, MatrixView{q.data(), f}, n, nullptr, all_one.data(), one);
    EXPECT_EQ(0, std::memcmp(all.data(), all_one.data(), all.size() * sizeof(float)));
    for (int r = 0; r < m; ++r) {
      cpu::matmul(x.data() + size_t(r) * k, 1, k, MatrixView{q.data(), f}, n, nullptr, row.data(),
                  two);
      EXPECT_EQ(0, std::memcmp(row.data(), all.data() + size_t(r) * n, n * sizeof(float))) << r;
      for (int j = 0; j < n; ++j) EXPECT_EQ(std::isnan(row[j]), r == 5) << r << "," << j;
    }
  }
  // Rows of B not a whole number of blocks are refused, not misread.
  std::vector<float> y(40);
  const std::vector<unsigned char> q = quantise(std::vector<float>(64, 1.0f), WeightFormat::kQ8);
  EXPECT_THROW(cpu::matmul(y.data(), 1, 40, MatrixView{q.data(), WeightFormat::kQ8}, 1, nullptr,
                           y.data(), two),
               Error);
  EXPECT_THROW(cpu::matmul_transposed(y.data(), 1, 40, MatrixView{q.data(), WeightFormat::kQ4}, 1,
                                      y.data(), two),
               Error);
}

// ---- conversion at load ----

// A GPT-2 of width 32: every matrix's rows are whole blocks. The matrices
// read back within half their block's scale, the rest is copied as it is.
TEST(QuantConversion, QuantisesTheMatricesAndCopiesTheRest) {
  ModelConfig c = test::tiny_config();
  c.n_embd = 32;
  const test::RandomGpt2 model = test::make_random_gpt2(c, 9);
  for (WeightFormat f : kBlockFormats) {
    SCOPED_TRACE(weight_format_name(f));
    const ModelWeights w = convert_weights(test::as_model_weights(model), f);
    ASSERT_EQ(w.format, f);
    ASSERT_EQ(w.wte, nullptr);
    // wte as it is ([vocab, C]); a layer matrix [in, out] transposed.
    const auto check = [&](const void* packed, const std::string& name, size_t out = 0) {
      ASSERT_NE(packed, nullptr) << name;
      std::vector<float> src = model.tensors.at(name);
      if (out) {
        const size_t in = src.size() / out;
        std::vector<float> t(src.size());
        for (size_t i = 0; i < in; ++i)
          for (size_t j = 0; j < out; ++j) t[j * in + i] = src[i * out + j];
        src = t;
      }
      const std::vector<unsigned char> want = quantise(src, f);
      EXPECT_EQ(0, std::memcmp(packed, want.data(), want.size())) << name;
    };
    check(w.wte_packed, "wte.weight");
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const std::string h = "h." + std::to_string(l) + ".";
      const size_t C = size_t(c.n_embd);
      check(w.layers[l].attn_qkv_packed, h + "attn.c_attn.weight", 3 * C);
      check(w.layers[l].attn_proj_packed, h + "attn.c_proj.weight", C);
      check(w.layers[l].mlp_fc_packed, h + "mlp.c_fc.weight", 4 * C);
      check(w.layers[l].mlp_proj_packed, h + "mlp.c_proj.weight", C);
      const std::vector<float>& bias = model.tensors.at(h + "attn.c_attn.bias");
      EXPECT_EQ(0, std::memcmp(w.layers[l].attn_qkv_bias, bias.data(), bias.size() * 4));
    }
    const std::vector<float>& wpe = model.tensors.at("wpe.weight");
    EXPECT_EQ(0, std::memcmp(w.wpe, wpe.data(), wpe.size() * 4));
  }
}

// A layer matrix is quantised transposed ([out, in]): a block too large for
// an f16 scale is named by the file's own index of its first value (input
// 0 of that output), not by its place in the transposed copy.
TEST(QuantConversion, AnOverflowingBlockOfATransposedMatrixIsNamedAsTheFileHasIt) {
  ModelConfig c = test::tiny_config();
  c.n_embd = 32;
  test::RandomGpt2 model = test::make_random_gpt2(c, 5);
  std::vector<float>& fc = model.tensors.at("h.1.mlp.c_fc.weight");  // [32, 128]
  fc[size_t(5) * 128 + 7] = 1e7f;  // input 5 of output 7: block 0 of stored row 7
  ModelWeights w = test::as_model_weights(model);
  w.source = "model-dir";
  try {
    convert_weights(w, WeightFormat::kQ8);
    FAIL() << "a scale beyond f16 was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "model-dir: the block of 32 values from tensor h.1.mlp.c_fc.weight at index 7 "
                 "has a q8 scale that f16 cannot hold; load it with --weights bf16 or f32");
  }
}

TEST(QuantConversion, RowsNotWholeBlocksAreRefusedNamingTheTensor) {
  ModelWeights w = test::as_model_weights(test::make_random_gpt2(test::tiny_config(), 4));
  w.source = "model-dir";
  try {
    convert_weights(w, WeightFormat::kQ4);
    FAIL() << "rows of 24 values were accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "model-dir: tensor wte.weight has rows of 24 values, not a multiple of 32, which "
                 "--weights q4 needs; load it with --weights f16, bf16 or f32");
  }
}

// ---- the bundled model under each format ----

// The memory report counts each matrix's blocks: 34 (q8) or 18 (q4) bytes
// per 32 values, scales included, where fp32 had 128.
TEST(QuantModel, TheMemoryReportCountsValuesAndScales) {
  const MemoryReport r32 = memory_report(*test::load_bundled(WeightFormat::kF32).engine);
  const ModelConfig c = test::load_bundled(WeightFormat::kF32).engine->config();
  const int64_t C = c.n_embd;
  const int64_t blocks = (int64_t(c.vocab_size) * C + c.n_layer * 12 * C * C) / 32;
  for (WeightFormat f : kBlockFormats) {
    const MemoryReport r = memory_report(*test::load_bundled(f).engine);
    const int64_t block_bytes = f == WeightFormat::kQ8 ? 34 : 18;
    EXPECT_EQ(r.weight_bytes, r32.weight_bytes - blocks * (128 - block_bytes))
        << weight_format_name(f);
    EXPECT_EQ(r.weight_format, weight_format_name(f));
    std::printf("weights %s: %lld bytes (f32: %lld)\n", weight_format_name(f),
                static_cast<long long>(r.weight_bytes), static_cast<long long>(r32.weight_bytes));
  }
}

// How far `got`'s logits are from `want`'s over `rows` rows of `v`: the
// largest difference, mean KL(p_want || p_got), and the share of rows whose
// top-1 token is the same.
struct Drift {
  double max_abs = 0, mean_kl = 0, top1 = 0;
};

Drift drift(const std::vector<float>& want, const std::vector<float>& got, int rows, int v) {
  const auto log_probs = [v](const float* l) {
    const double mx = *std::max_element(l, l + v);
    double s = 0;
    for (int i = 0; i < v; ++i) s += std::exp(l[i] - mx);
    std::vector<double> out(l, l + v);
    for (double& x : out) x -= mx + std::log(s);
    return out;
  };
  Drift d;
  for (int r = 0; r < rows; ++r) {
    const float* a = want.data() + size_t(r) * v;
    const float* g = got.data() + size_t(r) * v;
    const std::vector<double> la = log_probs(a), lg = log_probs(g);
    for (int i = 0; i < v; ++i) {
      d.max_abs = std::max<double>(d.max_abs, std::fabs(a[i] - g[i]));
      d.mean_kl += std::exp(la[i]) * (la[i] - lg[i]) / rows;
    }
    d.top1 += double((std::max_element(a, a + v) - a) == (std::max_element(g, g + v) - g)) / rows;
  }
  return d;
}

// Greedy steps before the first token where `a` and `b` differ, summed over
// three prompts of 16 new tokens each (48 at most).
int greedy_agreement(const LoadedModel& a, const LoadedModel& b) {
  int same = 0;
  for (const char* prompt : {"The old lighthouse", "Once upon a time", "In the morning"}) {
    std::vector<int> runs[2];
    for (int i = 0; i < 2; ++i) {
      SessionOptions o;
      o.max_new_tokens = 16;
      o.record_attention = false;
      Session s((i ? b : a).tokenizer, (i ? b : a).engine, o);
      s.set_prompt(prompt);
      s.run(1000);
      runs[i] = s.lanes()[0].generated;
    }
    EXPECT_EQ(runs[0].size(), 16u);
    EXPECT_EQ(runs[1].size(), 16u);
    same += static_cast<int>(
        std::mismatch(runs[0].begin(), runs[0].end(), runs[1].begin(), runs[1].end()).first -
        runs[0].begin());
  }
  return same;
}

// The first window of the validation text, teacher-forced, against fp32;
// then greedy continuations of three prompts. The bounds are the measured
// figures (printed; values in the table) with a margin of about 2x: the
// error is the weights' rounding (q8: 7 bits of each block's range, q4: 3),
// not the arithmetic, so it is the same on every machine up to the last
// bits of the fp32 sums.
TEST(QuantModel, LogitsStayNearFp32AndGreedyTokensMostlyAgree) {
  const LoadedModel ref = test::load_bundled(WeightFormat::kF32);
  const std::string text = test::read_text_file(test::fixture_dir() / "bundled/val.txt");
  std::vector<int> tokens = ref.tokenizer->encode_ids(text.substr(0, 4000));
  tokens.resize(std::min<size_t>(tokens.size(), size_t(ref.engine->config().n_ctx)));
  const int n = static_cast<int>(tokens.size()), V = ref.engine->config().vocab_size;
  ASSERT_GE(n, 200);
  ForwardOptions all;
  all.all_logits = true;
  const std::vector<float> want = ref.engine->forward_scratch(tokens, all).outputs[0].logits;
  struct Bound {
    WeightFormat format;
    double max_abs, mean_kl, min_top1;
    int min_greedy;  // of 48 steps, before each prompt's first differing token
  };
  // Measured (AVX2, 2 threads, 256 positions; weights and activations
  // rounded, matmul_blocks.h): q8 max |diff| 0.249, mean KL 2.7e-4, top-1
  // 97.7%, greedy 48 of 48; q4 2.79, 0.031, 82.4%, 17 of 48. Asserted at
  // about 2x (top-1 and greedy well below the measured).
  for (const Bound& b : {Bound{WeightFormat::kQ8, 0.5, 5.5e-4, 0.95, 36},
                         Bound{WeightFormat::kQ4, 6.5, 0.065, 0.70, 8}}) {
    const char* name = weight_format_name(b.format);
    const LoadedModel m = test::load_bundled(b.format);
    const std::vector<float> got = m.engine->forward_scratch(tokens, all).outputs[0].logits;
    ASSERT_EQ(got.size(), want.size());
    const Drift d = drift(want, got, n, V);
    const int greedy = greedy_agreement(ref, m);
    std::printf(
        "%s vs f32 over %d positions: max |logit diff| %.4g, KL mean %.3g, top-1 %.1f%%, "
        "greedy %d of 48\n",
        name, n, d.max_abs, d.mean_kl, 100 * d.top1, greedy);
    EXPECT_GT(d.max_abs, 0.0) << name;
    EXPECT_LE(d.max_abs, b.max_abs) << name;
    EXPECT_LE(d.mean_kl, b.mean_kl) << name;
    EXPECT_GE(d.top1, b.min_top1) << name;
    EXPECT_GE(greedy, b.min_greedy) << name;
  }
}

// Mean next-token loss over the first 2,048 tokens of the validation text
// (8 windows of 256), as WeightFormatModel's test does for bf16 / f16, with
// each format's own tolerance. Measured here: q8 +4.1e-4 nats, q4 +1.32e-2;
// the whole file's figures are in docs/usage.md. Asserted: q8 within 1e-3
// nats, q4 within 3e-2 (about 2.3x what each measured here), and q4's 3-bit
// steps cost more than q8's 7-bit ones.
TEST(QuantModel, ValidationLossRisesByNoMoreThanEachFormatsMeasuredCost) {
  const LoadedModel ref = test::load_bundled(WeightFormat::kF32);
  const std::string text = test::read_text_file(test::fixture_dir() / "bundled/val.txt");
  std::vector<int> tokens = ref.tokenizer->encode_ids(text);
  ASSERT_GE(tokens.size(), 2048u);
  tokens.resize(2048);
  const double want = evaluate_loss(*ref.engine, tokens, 256).mean_nats;
  double rise[2] = {0, 0};
  int i = 0;
  for (const auto& [f, tolerance] :
       {std::pair{WeightFormat::kQ8, 1e-3}, std::pair{WeightFormat::kQ4, 3e-2}}) {
    const double got = evaluate_loss(*test::load_bundled(f).engine, tokens, 256).mean_nats;
    std::printf("validation loss, 2048 tokens: f32 %.6f, %s %.6f (%+.2e nats)\n", want,
                weight_format_name(f), got, got - want);
    EXPECT_NE(got, want) << weight_format_name(f);
    EXPECT_LE(std::fabs(got - want), tolerance) << weight_format_name(f);
    rise[i++] = got - want;
  }
  EXPECT_GT(rise[1], rise[0]);
}

}  // namespace
}  // namespace ts
