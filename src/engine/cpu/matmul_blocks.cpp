// The q8 / q4 matrix product (matmul_blocks.h): the activations' rounding,
// the definition's scalar loop, and the split of the work over threads; the
// vector loop is matmul_blocks_simd.h.
#include "engine/cpu/matmul_blocks.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/cpu/matmul_blocks_vnni.h"
#include "engine/cpu/matmul_kernels.h"
#include "model/half_float.h"
#include "util/error.h"

#if defined(TS_HAVE_AVXVNNI_BLOCKS)
#include <cpuid.h>
#endif

#ifdef TS_HAVE_AVX2
#define TS_BLOCK_ISA avx2
#include "engine/cpu/matmul_blocks_simd.h"
#undef TS_BLOCK_ISA
#endif

namespace ts::cpu {
namespace {

// Whether the AVX-VNNI build of the vector loop runs (matmul_blocks.h).
std::atomic<bool> g_vnni{avxvnni_available()};

constexpr int kLanes = 8;  // int32 lanes of a block's dot product, 4 values each

// ---- a weight block's codes and scale ----
inline int code_at(const BlockQ8& b, int i) { return b.q[i]; }
inline int code_at(const BlockQ4& b, int i) {
  constexpr int kHalf = kQuantBlock / 2;
  return (i < kHalf ? b.q[i] & 0xF : b.q[i - kHalf] >> 4) - 8;
}
// Every f16 as fp32 (exact), 256 KB, the vector loop's block scales: one
// load per block where vcvtph2ps costs three micro-ops, two of them on the
// shuffle port the kernel's byte work already keeps busy.
const float* f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = fp16_to_fp32(static_cast<uint16_t>(h));
    return t;
  }();
  return table.data();
}

// The definition (matmul_blocks.h), one output at a time.
template <class Block>
float dot_scalar(const ActivationBlock* x, const Block* w, int nb) {
  float acc[kLanes] = {};
  for (int b = 0; b < nb; ++b) {
    const float d = x[b].d * fp16_to_fp32(w[b].d);
    for (int l = 0; l < kLanes; ++l) {
      int32_t p = 0;
      for (int t = 0; t < 4; ++t) p += int32_t(x[b].q[4 * l + t]) * code_at(w[b], 4 * l + t);
      acc[l] = std::fma(d, float(p), acc[l]);
    }
  }
  const float t0 = acc[0] + acc[4], t1 = acc[1] + acc[5], t2 = acc[2] + acc[6],
              t3 = acc[3] + acc[7];
  return (t0 + t1) + (t2 + t3);
}

// y[j0..j1) of one row (x: its blocks).
template <class Block>
void row_outputs(const ActivationBlock* x, int nb, const Block* w, int j0, int j1,
                 const float* bias, float* y, [[maybe_unused]] bool simd) {
  const size_t stride = static_cast<size_t>(nb);
  int j = j0;
#ifdef TS_HAVE_AVX2
  if (simd) {
#ifdef TS_HAVE_AVXVNNI_BLOCKS
    if (g_vnni.load(std::memory_order_relaxed))
      vnni_outputs(x, nb, w, j0, j1, f16_table(), y);
    else
#endif
      avx2::outputs(x, nb, w, j0, j1, f16_table(), y);
    j = j1;
  }
#endif
  for (; j < j1; ++j) y[j] = dot_scalar(x, w + j * stride, nb);
  if (bias)
    for (j = j0; j < j1; ++j) y[j] += bias[j];
}

template <class Block>
void run(const ActivationBlock* xa, int m, int nb, const Block* w, int n, const float* bias,
         float* y, ThreadPool& pool, bool simd) {
  // A decode step (a few rows): each thread streams its own unbroken range
  // of B's rows, two ranges per thread so a slow one does not hold the rest.
  // A prefill: ranges of 32 rows of B (at most 100 KB, which stay in cache
  // while every row of X is applied to them).
  const int ranges = m <= 8 ? 2 * pool.size() : (n + 31) / 32;
  const int chunk = std::max(4, ((n + ranges - 1) / ranges + 3) / 4 * 4);
  const int tasks = (n + chunk - 1) / chunk;
  pool.parallel_for(tasks, [&](int t) {
    const int j0 = t * chunk, j1 = std::min(n, j0 + chunk);
    for (int r = 0; r < m; ++r)
      row_outputs(xa + static_cast<size_t>(r) * nb, nb, w, j0, j1, bias,
                  y + static_cast<size_t>(r) * n, simd);
  });
}

}  // namespace

bool avxvnni_available() {
#if defined(TS_HAVE_AVXVNNI_BLOCKS)
  static const bool has = [] {
    // CPUID leaf 7, sub-leaf 1: EAX bit 4 is AVX-VNNI (the build's AVX2 implies
    // the OS saves the ymm registers).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 4)) != 0;
  }();
  return has;
#else
  return false;
#endif
}

void allow_avxvnni(bool allowed) { g_vnni.store(allowed && avxvnni_available()); }

const char* block_kernel(bool simd) {
#ifdef TS_HAVE_AVX2
  if (simd) return g_vnni.load(std::memory_order_relaxed) ? "avxvnni" : "avx2";
#endif
  (void)simd;
  return "scalar";
}

void quantise_activations(const float* x, int k, ActivationBlock* out) {
  for (int b = 0; b < k / kQuantBlock; ++b) {
    const float* v = x + static_cast<size_t>(b) * kQuantBlock;
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < kQuantBlock; ++i) {
      finite = finite && std::isfinite(v[i]);
      amax = std::max(amax, std::fabs(v[i]));
    }
    ActivationBlock& o = out[b];
    if (!finite || amax == 0.0f) {
      // NaN or infinity: d carries it into every term of the block.
      o.d = finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
      std::fill(o.q, o.q + kQuantBlock, int8_t{0});
      continue;
    }
    o.d = amax / 127.0f;
    for (int i = 0; i < kQuantBlock; ++i)
      o.q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(v[i] / o.d), -127.0f, 127.0f));
  }
}

void block_matmul(const float* x, int m, int k, const void* b, WeightFormat format, int n,
                  const float* bias, float* y, ThreadPool& pool, bool simd) {
  if (k % kQuantBlock != 0)
    throw Error(std::string("matmul: ") + weight_format_name(format) +
                " weights need rows of a multiple of 32 values, got " + std::to_string(k));
  if (m <= 0 || n <= 0) return;
  const int nb = k / kQuantBlock;
  thread_local std::vector<ActivationBlock> quantised;
  quantised.resize(static_cast<size_t>(m) * nb);
  ActivationBlock* const xa = quantised.data();
  for (int r = 0; r < m; ++r)
    quantise_activations(x + static_cast<size_t>(r) * k, k, xa + static_cast<size_t>(r) * nb);
  if (format == WeightFormat::kQ8)
    run(xa, m, nb, static_cast<const BlockQ8*>(b), n, bias, y, pool, simd);
  else
    run(xa, m, nb, static_cast<const BlockQ4*>(b), n, bias, y, pool, simd);
}

}  // namespace ts::cpu
