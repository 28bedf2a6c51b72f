// The rounding the weight conversion shares (weight_format.cpp and the
// quantizers q8_quantizer.cpp, q4_quantizer.cpp).
#pragma once

#include <algorithm>
#include <cstdint>

namespace qwen3::engine {

// Round half to even for |x| < 2^22 with plain float adds, so that the
// quantizers' candidate loops vectorize without SSE4.1.
inline __attribute__((always_inline)) float round_fast(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (x + kMagic) - kMagic;
}

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

}  // namespace qwen3::engine
