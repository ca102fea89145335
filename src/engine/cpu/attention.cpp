#include "engine/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace ts::cpu {
namespace {

float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
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

}  // namespace

void attention(const AttentionArgs& a, int head, int row_begin, int row_end) {
  const int c = a.n_head * a.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  thread_local std::vector<float> scores;
  scores.resize(a.context);
  for (int r = row_begin; r < row_end; ++r) {
    const int visible = a.start_pos + r + 1;  // causal: keys 0..pos
    const float* q = a.q + static_cast<long long>(r) * a.ldq + head * a.head_dim;
    for (int j = 0; j < visible; ++j) {
      const float* k =
          a.k_pool + static_cast<long long>(a.context_slots[j]) * c + head * a.head_dim;
      scores[j] = dot(q, k, a.head_dim) * scale;
    }
    softmax_inplace(scores.data(), visible);
    float* o = a.out + static_cast<long long>(r) * c + head * a.head_dim;
    std::memset(o, 0, sizeof(float) * a.head_dim);
    for (int j = 0; j < visible; ++j) {
      const float* v =
          a.v_pool + static_cast<long long>(a.context_slots[j]) * c + head * a.head_dim;
      const float p = scores[j];
      for (int d = 0; d < a.head_dim; ++d) o[d] += p * v[d];
    }
    if (a.probs) {
      float* pr = a.probs + (static_cast<long long>(head) * a.rows + r) * a.context;
      std::memcpy(pr, scores.data(), sizeof(float) * visible);
      std::memset(pr + visible, 0, sizeof(float) * (a.context - visible));
    }
  }
}

}  // namespace ts::cpu
