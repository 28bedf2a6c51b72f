#include "engine/q4_quantizer.h"

#include <algorithm>
#include <cmath>

#include "engine/quant_rounding.h"

namespace qwen3::engine {

namespace {

// 21 shrink factors x 2 signs. The study's 41 factors (tools/quant_study)
// gave the same agreement within noise; the search runs over every 4-bit
// weight at load.
constexpr int kShrinks = 21;
constexpr double kShrinkLo = 0.6, kShrinkStep = 0.025;

// The group u (in units of its largest |w|) on a grid of step f, codes -8..7.
inline __attribute__((always_inline)) float group_error(const float* u, float f) {
  return grid_squared_error<QN_Q4_GROUP>(u, f, -8.0f, 7.0f);
}

// The step s of a 4-bit grid every non-exact w[k] lies on (w = q s, q in
// -8..7, to float32 rounding), or 0: a checkpoint whose q4 matrices were
// rounded offline (GPTQ, tools/quant_study) loads with exactly its codes.
// Tried with the extreme on code -8 .. -1 or +7 .. +1, finest grid first; an
// ordinary BF16 group is off every grid within its first few entries.
double grid_step(const float* w, const bool* exact, size_t n, float top) {
  for (int m = 8; m >= 1; m--)
    for (int sign : {-1, 1}) {
      if (sign == 1 && m == 8) continue;  // +8 is not a code
      const double step = static_cast<double>(top) / (sign * m);
      bool on_grid = true;
      for (size_t k = 0; k < n && on_grid; k++) {
        if (exact[k]) continue;
        const double q = static_cast<double>(w[k]) / step, r = std::nearbyint(q);
        on_grid = std::fabs(q - r) <= 1e-4 && r >= -8 && r <= 7;
      }
      if (on_grid) return step;
    }
  return 0;
}

}  // namespace

bool q4_on_grid(const float* w, size_t n) {
  n = std::min<size_t>(n, QN_Q4_GROUP);
  const bool none[QN_Q4_GROUP] = {};
  float top = 0.0f;
  for (size_t k = 0; k < n; k++)
    if (std::fabs(w[k]) > std::fabs(top)) top = w[k];
  return top == 0.0f || grid_step(w, none, n, top) != 0;
}

__attribute__((target_clones("avx2", "default"))) void q4_quantize_group(const float* w, const bool* exact, size_t n,
                                                                       double p2, Q4Group& out) {
  out = Q4Group{};
  std::fill(out.codes, out.codes + QN_Q4_GROUP, uint8_t(QN_Q4_CODE_BIAS));
  n = std::min<size_t>(n, QN_Q4_GROUP);
  float top = 0.0f;  // the non-exact weight of largest magnitude, with its sign
  for (size_t k = 0; k < n; k++)
    if (!exact[k] && std::fabs(w[k]) > std::fabs(top)) top = w[k];
  if (top == 0.0f) return;
  const double mx = std::fabs(static_cast<double>(top));
  const double grid = grid_step(w, exact, n, top);
  if (grid != 0) {  // already 4-bit: keep its codes
    out.scale = static_cast<int32_t>(std::clamp<int64_t>(round_away_from_zero(grid * p2), -INT32_MAX, INT32_MAX));
    for (size_t k = 0; k < n; k++)
      if (!exact[k])
        out.codes[k] = static_cast<uint8_t>(static_cast<int>(std::nearbyint(w[k] / grid)) + QN_Q4_CODE_BIAS);
    return;
  }
  float u[QN_Q4_GROUP] = {};  // the group in units of mx; exact and padding entries 0
  for (size_t k = 0; k < n; k++)
    if (!exact[k]) u[k] = static_cast<float>(w[k] / mx);
  // Q4_0: the extreme onto -8 (scale of the opposite sign); the other sign puts it onto +7
  const double s0 = -static_cast<double>(top) / 8.0 * p2;
  int64_t best = 0;
  float best_err = 0;
  auto consider = [&](double s) {
    const int64_t sc = std::clamp<int64_t>(round_away_from_zero(s), -INT32_MAX, INT32_MAX);
    if (sc == 0 || sc == best) return;
    const float e = group_error(u, static_cast<float>(static_cast<double>(sc) / (mx * p2)));
    if (best == 0 || e < best_err) best_err = e, best = sc;
  };
  consider(s0);
  for (int t = 0; t < kShrinks; t++) {
    const double shrink = kShrinkLo + kShrinkStep * t;
    consider(s0 * shrink);
    consider(-s0 * 8.0 / 7.0 * shrink);
  }
  if (best == 0) return;
  out.scale = static_cast<int32_t>(best);
  const double to_code = p2 / static_cast<double>(best);
  for (size_t k = 0; k < n; k++) {
    if (exact[k]) continue;
    const double v = std::clamp(std::nearbyint(static_cast<double>(w[k]) * to_code), -8.0, 7.0);
    out.codes[k] = static_cast<uint8_t>(static_cast<int>(v) + QN_Q4_CODE_BIAS);
  }
}

}  // namespace qwen3::engine
