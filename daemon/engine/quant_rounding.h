// The rounding the weight conversion shares (weight_format.cpp and the
// quantizers q8_quantizer.cpp, q4_quantizer.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace qwen3::engine {

// Round half to even for |x| < 2^22 with plain float adds, so that the
// quantizers' candidate loops vectorize without SSE4.1.
constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23
inline __attribute__((always_inline)) float round_fast(float x) { return (x + kRoundMagic) - kRoundMagic; }

// Round half away from zero (what llround does), for |v| < 2^62.
inline int64_t round_away_from_zero(double v) { return static_cast<int64_t>(v >= 0 ? v + 0.5 : v - 0.5); }

// Squared error of the N values u (N a multiple of 8) rounded to the grid of
// step f, codes clamped to [lo, hi]: how the quantizers score a candidate
// scale. 8 partial sums: the reduction vectorizes without -ffast-math.
template <int N>
inline __attribute__((always_inline)) float grid_squared_error(const float* u, float f, float lo, float hi) {
  static_assert(N % 8 == 0);
  const float inv = 1.0f / f;
  float lane[8] = {};
  for (int k = 0; k < N; k += 8)
    for (int j = 0; j < 8; j++) {
      const float q = std::clamp(round_fast(u[k + j] * inv), lo, hi);
      const float d = u[k + j] - f * q;
      lane[j] += d * d;
    }
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

// W floats as one GCC vector: 4 for SSE2, 8 for AVX2, 16 for AVX-512 (a
// vector wider than the target's registers is split into scalars).
template <int W>
struct FloatVec;
template <>
struct FloatVec<4> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct FloatVec<8> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct FloatVec<16> {
  typedef float type __attribute__((vector_size(64)));
};

// grid_squared_error of the same u for each of the C steps f[0, C), bit for
// bit: per step the same float operations in the same order (round_fast and
// std::clamp spelled out), but vectorized across W steps instead of across u,
// so that a whole scale search shares each u[k] and needs no horizontal sums.
template <int N, int C, int W>
inline __attribute__((always_inline)) void grid_squared_errors(const float* u, const float* f, float lo, float hi,
                                                               float* err) {
  static_assert(N % 8 == 0 && C % W == 0);
  using V = typename FloatVec<W>::type;
  // Bounds GCC cannot fold: only then does it turn the clamp below into
  // minps / maxps (a < b ? a : b, a > b ? a : b: the same bits, NaN included).
  const volatile float lo_opaque = lo, hi_opaque = hi;
  const V vlo = V{} + lo_opaque, vhi = V{} + hi_opaque;
  for (int c0 = 0; c0 < C; c0 += W) {
    V step, lane[8] = {};  // lane[j]: the W steps' partial sums over u[j], u[j + 8], ...
    std::memcpy(&step, f + c0, sizeof step);
    const V inv = 1.0f / step;
    for (int k0 = 0; k0 < N; k0 += 8)
#pragma GCC unroll 8
      for (int j = 0; j < 8; j++) {
        const V r = (u[k0 + j] * inv + kRoundMagic) - kRoundMagic;
        const V t = vhi < r ? vhi : r, q = t < vlo ? vlo : t;  // std::clamp(r, lo, hi)
        const V d = u[k0 + j] - step * q;
        lane[j] += d * d;
      }
    const V sum = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    std::memcpy(err + c0, &sum, sizeof sum);
  }
}

}  // namespace qwen3::engine
