// The rounding the weight quantizers share (q8_quantizer.cpp, q4_quantizer.cpp).
#pragma once

#include <cstdint>

namespace qwen3::engine {

// Round half to even for |x| < 2^22 with plain float adds, so that the
// quantizers' candidate loops vectorize without SSE4.1.
inline __attribute__((always_inline)) float round_fast(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (x + kMagic) - kMagic;
}

// Round half away from zero, as the rest of the conversion does.
inline int64_t round_away_from_zero(double v) { return static_cast<int64_t>(v >= 0 ? v + 0.5 : v - 0.5); }

}  // namespace qwen3::engine
