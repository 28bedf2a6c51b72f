#include "reference/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace qwen3::reference {

void rms_norm(const float* x, const float* weight, float* out, int n, float eps) {
  double ss = 0;  // double: the outlier channels reach thousands
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
  for (int i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

void rope_table(int position, int head_dim, double theta, float* table) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    double inv_freq = std::pow(theta, -2.0 * i / head_dim);
    double angle = position * inv_freq;
    table[2 * i] = static_cast<float>(std::cos(angle));
    table[2 * i + 1] = static_cast<float>(std::sin(angle));
  }
}

void apply_rope(float* v, int head_dim, const float* table) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    float c = table[2 * i], s = table[2 * i + 1];
    float a = v[i], b = v[i + half];
    v[i] = a * c - b * s;
    v[i + half] = b * c + a * s;
  }
}

void silu_mul(const float* gate, const float* up, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

namespace {

typedef float v8f __attribute__((vector_size(32)));

// q . k with 8 partial sums in a fixed order (vectorizes without reassociation).
inline __attribute__((always_inline)) float dot8(const float* a, const float* b, int n) {
  v8f acc{};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    v8f x, y;
    std::memcpy(&x, a + i, sizeof x);
    std::memcpy(&y, b + i, sizeof y);
    acc += x * y;
  }
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

__attribute__((target_clones("avx2", "default"))) void attend(const float* q, const float* k, const float* v,
                                                                      int n_pos, int stride, int head_dim,
                                                                      float* scores, float* out) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  float max_score = -INFINITY;
  for (int s = 0; s < n_pos; ++s) {
    scores[s] = dot8(q, k + static_cast<int64_t>(s) * stride, head_dim) * scale;
    max_score = std::max(max_score, scores[s]);
  }
  float sum = 0;
  for (int s = 0; s < n_pos; ++s) {
    scores[s] = std::exp(scores[s] - max_score);
    sum += scores[s];
  }
  const float inv = 1.0f / sum;
  for (int i = 0; i < head_dim; ++i) out[i] = 0;
  for (int s = 0; s < n_pos; ++s) {
    const float p = scores[s] * inv;
    const float* vs = v + static_cast<int64_t>(s) * stride;
    for (int i = 0; i < head_dim; ++i) out[i] += p * vs[i];
  }
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return logits.empty() ? -1 : best;
}

std::vector<std::pair<int32_t, float>> top_k(std::span<const float> logits, int k) {
  k = std::clamp(k, 0, static_cast<int>(logits.size()));
  auto better = [](const std::pair<int32_t, float>& a, const std::pair<int32_t, float>& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  };
  // A running min-heap of the k best keeps this O(V log k).
  std::vector<std::pair<int32_t, float>> heap;
  heap.reserve(k + 1);
  for (size_t i = 0; i < logits.size() && k > 0; ++i) {
    std::pair<int32_t, float> c{static_cast<int32_t>(i), logits[i]};
    if (static_cast<int>(heap.size()) < k) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(c, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  return heap;
}

}  // namespace qwen3::reference
