#include "engine/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "model/half_float.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TS_HAVE_AVX2 1
#endif

namespace ts::cpu {
namespace {

// a * b + c, one rounding where the machine has FMA: spelt out, so that the
// compiler contracts the sums of every format alike (the fp32 and 16-bit
// loops would otherwise differ in whether they fuse).
inline float madd(float a, float b, float c) {
#ifdef __FMA__
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// Byte offset of element i of a pool in format F. In q8, i is block-aligned
// (a head's slice of a row starts on a block: head_dim is a multiple of 32).
template <WeightFormat F>
size_t byte_offset(long long i) {
  if constexpr (F == WeightFormat::kQ8) {
    return static_cast<size_t>(i / kQuantBlock) * sizeof(BlockQ8);
  } else {
    return static_cast<size_t>(i) * (F == WeightFormat::kF32 ? 4 : 2);
  }
}

// The q8 block holding element i of a pool, and i's place in it.
inline const BlockQ8& q8_block(const void* pool, long long i) {
  return static_cast<const BlockQ8*>(pool)[i / kQuantBlock];
}

// Element i of a pool in format F, widened to fp32 (exact for f16 and bf16;
// for q8 d * q, also exact: dequantised()).
template <WeightFormat F>
float load1(const void* pool, long long i) {
  if constexpr (F == WeightFormat::kF32) {
    return static_cast<const float*>(pool)[i];
  } else if constexpr (F == WeightFormat::kQ8) {
    return dequantised(q8_block(pool, i), static_cast<int>(i % kQuantBlock));
  } else {
    uint16_t h;
    std::memcpy(&h, static_cast<const char*>(pool) + 2 * i, sizeof h);
    return F == WeightFormat::kBF16 ? bf16_to_fp32(h) : fp16_to_fp32(h);
  }
}

#ifdef TS_HAVE_AVX2
// Elements i..i+7 widened to fp32: bf16 is the top half of an fp32 (a shift),
// f16 goes through F16C's vcvtph2ps.
// q8 (i a multiple of 8): eight int8 codes widened to fp32 times the
// block's scale, a product that is exact (the same value as load1's).
template <WeightFormat F>
__m256 load8(const void* pool, long long i) {
  if constexpr (F == WeightFormat::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(pool) + i);
  } else if constexpr (F == WeightFormat::kQ8) {
    const BlockQ8& b = q8_block(pool, i);
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.q + i % kQuantBlock));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)),
                         _mm256_set1_ps(fp16_to_fp32(b.d)));
  } else {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(pool) + i));
    if constexpr (F == WeightFormat::kBF16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
#ifdef __F16C__
      return _mm256_cvtph_ps(h);
#else
      alignas(32) float f[8];
      for (int j = 0; j < 8; ++j) f[j] = load1<F>(pool, i + j);
      return _mm256_load_ps(f);
#endif
    }
  }
}
#endif

// q . k, k being n elements of a pool from element k0. With AVX2 and a head
// size that is a multiple of 8, eight lanes of partial sums added at the end
// (a scalar sum waits on each add in turn: at 64 dims it made attention 6% of
// a GPT-2 124M decode step at context 64).
template <WeightFormat F>
float dot(const float* a, const void* pool, long long k0, int n) {
#ifdef TS_HAVE_AVX2
  if (n % 8 == 0) {
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8)
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8<F>(pool, k0 + i), acc);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
#endif
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s = madd(a[i], load1<F>(pool, k0 + i), s);
  return s;
}

// o += p * v, v being n elements of a pool from element v0.
template <WeightFormat F>
void add_scaled(float p, const void* pool, long long v0, int n, float* o) {
#ifdef TS_HAVE_AVX2
  if (n % 8 == 0) {
    const __m256 pp = _mm256_set1_ps(p);
    for (int d = 0; d < n; d += 8)
      _mm256_storeu_ps(o + d, _mm256_fmadd_ps(pp, load8<F>(pool, v0 + d), _mm256_loadu_ps(o + d)));
    return;
  }
#endif
  for (int d = 0; d < n; ++d) o[d] = madd(p, load1<F>(pool, v0 + d), o[d]);
}

// Numerically safe softmax of n values in place (max subtracted).
void softmax_inplace(float* x, int n) {
  float mx = x[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

// How many keys ahead a piece asks for its K and V runs (2 and 8 did worse
// than 3 to 6 in the measurement below).
constexpr int kPrefetchKeys = 4;

// Asks for bytes [at, at + bytes) of both pools. A plain function: g++ 12
// drops prefetch loops written inside a lambda.
inline void prefetch_runs(const void* k_pool, const void* v_pool, size_t at, size_t bytes) {
  const char* k = static_cast<const char*>(k_pool) + at;
  const char* v = static_cast<const char*>(v_pool) + at;
  for (size_t b = 0; b < bytes; b += 64) {
    __builtin_prefetch(k + b);
    __builtin_prefetch(v + b);
  }
}

template <WeightFormat F>
void attention_in(const AttentionArgs& a, int head_begin, int head_end, int row_begin,
                  int row_end) {
  const int c = a.n_head * a.head_dim;  // a row of q and of out
  const int kv_heads = a.n_kv_head > 0 ? a.n_kv_head : a.n_head;
  const int group = a.n_head / kv_heads;     // query heads per KV head
  const int kv_row = kv_heads * a.head_dim;  // a row of the pools
  const int heads = head_end - head_begin;
  // Each head's column in a pool row, computed once (no division per key).
  thread_local std::vector<int> kv_cols;
  kv_cols.resize(heads);
  for (int h = head_begin; h < head_end; ++h) kv_cols[h - head_begin] = (h / group) * a.head_dim;
  const auto kv_col = [&](int h) { return kv_cols[h - head_begin]; };
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  thread_local std::vector<float> scores;  // [heads][context]
  thread_local std::vector<int> keys;      // the keys a masked row sees, in order
  scores.resize(static_cast<size_t>(heads) * a.context);
  const auto score_row = [&](int h) { return scores.data() + static_cast<size_t>(h) * a.context; };
  for (int r = row_begin; r < row_end; ++r) {
    // The keys this row sees: causal 0..pos, or the cache plus its mask row.
    int visible = a.start_pos + r + 1;
    const int* key_index = nullptr;  // null: keys 0..visible-1
    if (a.mask) {
      keys.resize(a.start_pos + r + 1);
      visible = 0;
      for (int j = 0; j < a.start_pos; ++j) keys[visible++] = j;
      for (int j = 0; j <= r; ++j)
        if (a.mask[static_cast<size_t>(r) * a.rows + j]) keys[visible++] = a.start_pos + j;
      key_index = keys.data();
    }
    const auto key = [&](int i) { return key_index ? key_index[i] : i; };
    const float* q = a.q + static_cast<long long>(r) * a.ldq;
    // Key by key, the piece's heads inner: their slices of a cached row are
    // one contiguous run, read together. The K and V runs of the key
    // kPrefetchKeys ahead are asked for meanwhile: in a decode step the K/V
    // rows come from memory (the weights read since they were last touched
    // evicted them), and a piece's run is a fraction of each pool row, so
    // the hardware prefetchers, which follow whole streams within a page, do
    // not fetch it. (One thread over half the heads of GPT-2 124M's 12
    // layers, the pools evicted first, median of 10 alternated runs: context
    // 512, 2.8 ms against 3.1 ms asking for key i's V run alone; context
    // 1024, 7.5 against 9.2 ms.) Each head's own sums are the same whichever
    // heads share its piece.
    const size_t run_bytes = byte_offset<F>(kv_col(head_end - 1) - kv_col(head_begin) + a.head_dim);
    const auto run_at = [&](int i) {
      return byte_offset<F>(static_cast<long long>(a.context_slots[key(i)]) * kv_row +
                            kv_col(head_begin));
    };
    for (int i = 0; i < std::min(kPrefetchKeys, visible); ++i)
      prefetch_runs(a.k_pool, a.v_pool, run_at(i), run_bytes);
    for (int i = 0; i < visible; ++i) {
      if (i + kPrefetchKeys < visible)
        prefetch_runs(a.k_pool, a.v_pool, run_at(i + kPrefetchKeys), run_bytes);
      const long long row = static_cast<long long>(a.context_slots[key(i)]) * kv_row;
      for (int h = head_begin; h < head_end; ++h)
        score_row(h - head_begin)[i] =
            dot<F>(q + h * a.head_dim, a.k_pool, row + kv_col(h), a.head_dim) * scale;
    }
    for (int h = 0; h < heads; ++h) softmax_inplace(score_row(h), visible);
    float* o = a.out + static_cast<long long>(r) * c;
    std::memset(o + head_begin * a.head_dim, 0, sizeof(float) * heads * a.head_dim);
    for (int i = 0; i < visible; ++i) {
      const long long row = static_cast<long long>(a.context_slots[key(i)]) * kv_row;
      for (int h = head_begin; h < head_end; ++h)
        add_scaled<F>(score_row(h - head_begin)[i], a.v_pool, row + kv_col(h), a.head_dim,
                      o + h * a.head_dim);
    }
    if (a.probs) {
      for (int h = head_begin; h < head_end; ++h) {
        float* pr = a.probs + (static_cast<long long>(h) * a.rows + r) * a.context;
        const float* sr = score_row(h - head_begin);
        if (!key_index) {
          std::memcpy(pr, sr, sizeof(float) * visible);
          std::memset(pr + visible, 0, sizeof(float) * (a.context - visible));
        } else {
          std::memset(pr, 0, sizeof(float) * a.context);
          for (int i = 0; i < visible; ++i) pr[key_index[i]] = sr[i];
        }
      }
    }
  }
}

}  // namespace

void attention(const AttentionArgs& a, int head_begin, int head_end, int row_begin, int row_end) {
  switch (a.kv_format) {
    case WeightFormat::kBF16:
      return attention_in<WeightFormat::kBF16>(a, head_begin, head_end, row_begin, row_end);
    case WeightFormat::kF16:
      return attention_in<WeightFormat::kF16>(a, head_begin, head_end, row_begin, row_end);
    case WeightFormat::kQ8:
      return attention_in<WeightFormat::kQ8>(a, head_begin, head_end, row_begin, row_end);
    case WeightFormat::kF32:
    case WeightFormat::kQ4:  // never a KV format (parse_kv_format refuses it)
      break;
  }
  attention_in<WeightFormat::kF32>(a, head_begin, head_end, row_begin, row_end);
}

}  // namespace ts::cpu
