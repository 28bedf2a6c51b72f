#include "reference/matmul.h"

#include <algorithm>
#include <type_traits>
#include <cstring>
#include <vector>

namespace qwen3::reference {
namespace {

typedef float v8f __attribute__((vector_size(32)));
typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint32_t v8u32 __attribute__((vector_size(32)));

#define QWEN3_INLINE inline __attribute__((always_inline))

QWEN3_INLINE v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
QWEN3_INLINE v8f load8(const uint16_t* p) {
  v8u16 h;
  std::memcpy(&h, p, sizeof h);
  v8u32 bits = __builtin_convertvector(h, v8u32) << 16;  // bf16 is the top half of a float
  v8f f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
QWEN3_INLINE float load1(const float* p) { return *p; }
QWEN3_INLINE float load1(const uint16_t* p) {
  uint32_t bits = static_cast<uint32_t>(*p) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
QWEN3_INLINE float hsum(v8f s) { return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])); }

// NR weight rows against NT x rows. Every (row, token) result is the same
// sequence of operations whatever NR and NT are: one 8-lane partial sum over
// the columns in order, a fixed horizontal sum, then the scalar tail. That is
// what makes batched and one-token-at-a-time results identical to the bit.
template <int NR, int NT, class W>
QWEN3_INLINE void micro_kernel(const float* x, int64_t ldx, const W* w, int64_t n, float* y, int64_t ldy) {
  v8f acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = v8f{};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8f xv[NT];
    for (int t = 0; t < NT; ++t) xv[t] = load8(x + t * ldx + i);
    for (int r = 0; r < NR; ++r) {
      v8f wv = load8(w + r * n + i);
      for (int t = 0; t < NT; ++t) acc[r][t] += xv[t] * wv;
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) {
      float s = hsum(acc[r][t]);
      for (int64_t j = i; j < n; ++j) s += x[t * ldx + j] * load1(w + r * n + j);
      y[t * ldy + r] = s;
    }
}

// Rows [r0, r1) of w against tokens [t0, t1), in register blocks of 4 rows x 2 tokens.
template <class W>
QWEN3_INLINE void block(const float* x, int64_t t0, int64_t t1, int64_t n, const W* w, int64_t r0, int64_t r1,
                        float* y, int64_t ldy) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    int64_t t = t0;
    for (; t + 2 <= t1; t += 2) micro_kernel<4, 2>(x + t * n, n, w + (r - r0) * n, n, y + t * ldy + r, ldy);
    if (t < t1) micro_kernel<4, 1>(x + t * n, n, w + (r - r0) * n, n, y + t * ldy + r, ldy);
  }
  for (; r < r1; ++r)
    for (int64_t t = t0; t < t1; ++t) micro_kernel<1, 1>(x + t * n, n, w + (r - r0) * n, n, y + t * ldy + r, ldy);
}

template <class W>
QWEN3_INLINE void matmul_impl(const float* x, int64_t tokens, int64_t cols, const W* w, int64_t row_begin,
                              int64_t row_end, float* y, int64_t ldy) {
  // A tile of weight rows (~256 KB as float) stays in L2 while token tiles stream past it.
  const int64_t row_tile = std::clamp<int64_t>((65536 / std::max<int64_t>(cols, 1)) / 4 * 4, 4, 64);
  constexpr int64_t kTokenTile = 32;
  // With several tokens, BF16 rows are widened once per tile instead of once per token.
  const bool widen = !std::is_same_v<W, float> && tokens >= 4;
  thread_local std::vector<float> wide;
  for (int64_t r0 = row_begin; r0 < row_end; r0 += row_tile) {
    const int64_t r1 = std::min(row_end, r0 + row_tile);
    const W* wt = w + r0 * cols;
    const float* wf = nullptr;
    if (widen) {
      wide.resize((r1 - r0) * cols);
      for (int64_t i = 0; i < (r1 - r0) * cols; ++i) wide[i] = load1(wt + i);
      wf = wide.data();
    }
    for (int64_t t0 = 0; t0 < tokens; t0 += kTokenTile) {
      const int64_t t1 = std::min(tokens, t0 + kTokenTile);
      if (wf)
        block(x, t0, t1, cols, wf, r0, r1, y, ldy);
      else
        block(x, t0, t1, cols, wt, r0, r1, y, ldy);
    }
  }
}

}  // namespace

__attribute__((target_clones("avx2", "default"))) void matmul_bf16(const float* x, int64_t tokens,
                                                                           int64_t cols, const uint16_t* w,
                                                                           int64_t row_begin, int64_t row_end,
                                                                           float* y, int64_t ldy) {
  matmul_impl(x, tokens, cols, w, row_begin, row_end, y, ldy);
}

__attribute__((target_clones("avx2", "default"))) void matmul_f32(const float* x, int64_t tokens,
                                                                          int64_t cols, const float* w,
                                                                          int64_t row_begin, int64_t row_end, float* y,
                                                                          int64_t ldy) {
  matmul_impl(x, tokens, cols, w, row_begin, row_end, y, ldy);
}

}  // namespace qwen3::reference
