#include "reference/matmul.h"

#include <algorithm>
#include <cstring>

namespace qwen3::reference {
namespace {

typedef float v8f __attribute__((vector_size(32)));
typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint32_t v8u32 __attribute__((vector_size(32)));

inline __attribute__((always_inline)) v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline __attribute__((always_inline)) v8f load8(const uint16_t* p) {
  v8u16 h;
  std::memcpy(&h, p, sizeof h);
  v8u32 bits = __builtin_convertvector(h, v8u32) << 16;  // bf16 is the top half of a float
  v8f f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline __attribute__((always_inline)) float load1(const float* p) { return *p; }
inline __attribute__((always_inline)) float load1(const uint16_t* p) {
  uint32_t bits = static_cast<uint32_t>(*p) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline __attribute__((always_inline)) float hsum(v8f a, v8f b) {
  v8f s = a + b;
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

// NR weight rows against one x row; two accumulators per row hide add latency.
template <int NR, class W>
inline __attribute__((always_inline)) void dot_rows(const float* x, int64_t n, const W* const* w, float* out) {
  v8f a[NR], b[NR];
  for (int k = 0; k < NR; ++k) a[k] = b[k] = v8f{};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v8f x0 = load8(x + i), x1 = load8(x + i + 8);
    for (int k = 0; k < NR; ++k) {
      a[k] += x0 * load8(w[k] + i);
      b[k] += x1 * load8(w[k] + i + 8);
    }
  }
  for (int k = 0; k < NR; ++k) {
    float s = hsum(a[k], b[k]);
    for (int64_t j = i; j < n; ++j) s += x[j] * load1(w[k] + j);
    out[k] = s;
  }
}

template <class W>
inline __attribute__((always_inline)) void matmul_impl(const float* x, int64_t tokens, int64_t cols, const W* w,
                                                       int64_t row_begin, int64_t row_end, float* y, int64_t ldy) {
  // Tiles keep a block of weight rows and a block of x rows in L2 together.
  constexpr int64_t kRowTile = 64, kTokenTile = 32;
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kRowTile) {
    const int64_t r1 = std::min(row_end, r0 + kRowTile);
    for (int64_t t0 = 0; t0 < tokens; t0 += kTokenTile) {
      const int64_t t1 = std::min(tokens, t0 + kTokenTile);
      int64_t r = r0;
      for (; r + 4 <= r1; r += 4) {
        const W* rows[4] = {w + r * cols, w + (r + 1) * cols, w + (r + 2) * cols, w + (r + 3) * cols};
        for (int64_t t = t0; t < t1; ++t) {
          float out[4];
          dot_rows<4>(x + t * cols, cols, rows, out);
          for (int k = 0; k < 4; ++k) y[t * ldy + r + k] = out[k];
        }
      }
      for (; r < r1; ++r) {
        const W* rows[1] = {w + r * cols};
        for (int64_t t = t0; t < t1; ++t) dot_rows<1>(x + t * cols, cols, rows, &y[t * ldy + r]);
      }
    }
  }
}

}  // namespace

__attribute__((target_clones("arch=haswell", "default"))) void matmul_bf16(const float* x, int64_t tokens,
                                                                           int64_t cols, const uint16_t* w,
                                                                           int64_t row_begin, int64_t row_end,
                                                                           float* y, int64_t ldy) {
  matmul_impl(x, tokens, cols, w, row_begin, row_end, y, ldy);
}

__attribute__((target_clones("arch=haswell", "default"))) void matmul_f32(const float* x, int64_t tokens,
                                                                          int64_t cols, const float* w,
                                                                          int64_t row_begin, int64_t row_end, float* y,
                                                                          int64_t ldy) {
  matmul_impl(x, tokens, cols, w, row_begin, row_end, y, ldy);
}

}  // namespace qwen3::reference
