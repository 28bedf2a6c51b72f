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
// Q4_0, then per shrink both signs: the order the search breaks ties in.
// Padded to whole vectors of grid_squared_errors (scale 0: not a candidate).
constexpr int kCandidates = 1 + 2 * kShrinks;
constexpr int kPadded = (kCandidates + 15) / 16 * 16;

// Per candidate its factor on the Q4_0 scale s0 (slot 0 and odd slots) or on
// -s0 * 8 / 7 (the other sign: the extreme onto +7); 0 in the padding.
struct CandidateFactors {
  double factor[kPadded] = {};
  int64_t other_sign[kPadded] = {};  // 0 or 1, as wide as the doubles: the selection vectorizes
};
constexpr CandidateFactors candidate_factors() {
  CandidateFactors t;
  t.factor[0] = 1.0;
  for (int i = 0; i < kShrinks; i++) {
    const double shrink = kShrinkLo + kShrinkStep * i;
    t.factor[1 + 2 * i] = t.factor[2 + 2 * i] = shrink;
    t.other_sign[2 + 2 * i] = 1;
  }
  return t;
}
constexpr CandidateFactors kFactors = candidate_factors();

// Scale 0, every code 8 (weight 0): what exact and padding entries keep.
constexpr Q4Group empty_group() {
  Q4Group g;
  for (uint8_t& c : g.codes) c = QN_Q4_CODE_BIAS;
  return g;
}
constexpr Q4Group kEmptyGroup = empty_group();

// The codes of grid_step's grids, finest first: the extreme on -8, -7, +7, .. +1.
constexpr int kGridCodes[] = {-8, -7, 7, -6, 6, -5, 5, -4, 4, -3, 3, -2, 2, -1, 1};
constexpr int kGrids = sizeof kGridCodes / sizeof kGridCodes[0];

// |x - nearest integer| for |x| < 2^51, exactly (round_fast's trick in double).
inline __attribute__((always_inline)) double off_integer(double x) {
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  return std::fabs(x - ((x + kMagic) - kMagic));
}

// The grids (bit i: kGridCodes[i]) that w[0, n) may lie on by a quick test:
// (w[k] / top) * code instead of w[k] / step, without libm, stopping once none
// is left. Both quotients are within a few ulps of w[k] code / top (|w[k]| <=
// |top|, so |quotient| <= 8): 1e-9 of slack on the exact test's 1e-4 never
// rules out a grid the exact test accepts.
inline __attribute__((always_inline)) uint32_t possible_grids(const float* w, const bool* exact, size_t n, float top) {
  uint32_t open = (1u << kGrids) - 1;
  for (size_t k = 0; k < n && open; k++) {
    if (exact[k]) continue;
    const double ratio = static_cast<double>(w[k]) / top;
    for (int i = 0; i < kGrids; i++)
      if (off_integer(ratio * kGridCodes[i]) > 1e-4 + 1e-9) open &= ~(1u << i);
  }
  return open;
}

// The step s of a 4-bit grid every non-exact w[k] lies on (w = q s, q in
// -8..7, to float32 rounding), or 0: a checkpoint whose q4 matrices were
// rounded offline (GPTQ, tools/quant_study) loads with exactly its codes.
// Tried with the extreme on code -8 .. -1 or +7 .. +1, finest grid first; an
// ordinary BF16 group is off every grid within its first few entries, which
// possible_grids finds without the exact test's divisions.
inline __attribute__((always_inline)) double grid_step(const float* w, const bool* exact, size_t n, float top) {
  for (uint32_t open = possible_grids(w, exact, n, top); open != 0; open &= open - 1) {
    const double step = static_cast<double>(top) / kGridCodes[__builtin_ctz(open)];  // the finest left
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

// The candidates' int32 scales in search order (0 where one rounds to 0, and
// in the padding) and their steps in units of mx (a scale of 0 gets scale 1's
// step: scored, never picked). s0 is the Q4_0 scale (the extreme onto -8) in
// fixed point, mx_p2 = mx * p2. Clamping to +-INT32_MAX before truncating
// gives round_away_from_zero's clamped result, and vectorizes.
inline __attribute__((always_inline)) void candidate_scales(double s0, double mx_p2, int32_t (&sc)[kPadded],
                                                            float (&f)[kPadded]) {
  const double s7 = -s0 * 8.0 / 7.0, top = INT32_MAX;
  for (int c = 0; c < kPadded; c++) {
    const double s = (kFactors.other_sign[c] ? s7 : s0) * kFactors.factor[c];
    const double r = s + (s >= 0 ? 0.5 : -0.5), clamped = top < r ? top : r;
    sc[c] = static_cast<int32_t>(clamped < -top ? -top : clamped);
  }
  for (int c = 0; c < kPadded; c++) f[c] = static_cast<float>(static_cast<double>(sc[c] + (sc[c] == 0)) / mx_p2);
}

// The scale of least error, the earliest on ties (a repeated scale scores the
// same as its first occurrence): the one-at-a-time search's pick. 0 when no
// scale is nonzero.
inline __attribute__((always_inline)) int32_t least_error_scale(const int32_t (&sc)[kPadded],
                                                                const float (&err)[kPadded]) {
  int32_t best = 0;
  float best_err = 0;
  for (int c = 0; c < kCandidates; c++) {
    if (sc[c] == 0 || sc[c] == best) continue;
    if (best == 0 || err[c] < best_err) best_err = err[c], best = sc[c];
  }
  return best;
}

// The entry of largest magnitude, with its sign: the first of equals, never a
// NaN; 0 when all are 0. Vectorized: a running max over k carries a latency.
template <int W>
inline __attribute__((always_inline)) float extreme(const float (&v)[QN_Q4_GROUP]) {
  using V = typename FloatVec<W>::type;
  V lanes = {};
  for (int k0 = 0; k0 < QN_Q4_GROUP; k0 += W) {
    V a;
    std::memcpy(&a, v + k0, sizeof a);
    a = a < 0 ? -a : a;
    lanes = lanes < a ? a : lanes;
  }
  float mx = 0;
  for (int i = 0; i < W; i++) mx = mx < lanes[i] ? lanes[i] : mx;
  for (int k = 0; k < QN_Q4_GROUP; k++)
    if (std::fabs(v[k]) == mx) return v[k];
  return 0.0f;
}

// q4_quantize_group with vectors of W floats. Every candidate's error is
// computed at once (grid_squared_errors), then the least picked in search
// order: the scale a one-at-a-time search with grid_squared_error picks.
template <int W>
inline __attribute__((always_inline)) void quantize(const float* w, const bool* exact, size_t n, double p2,
                                                    Q4Group& out) {
  out = kEmptyGroup;
  n = std::min<size_t>(n, QN_Q4_GROUP);
  float v[QN_Q4_GROUP] = {};  // w with exact and padding entries 0: they neither set nor feel the scale
  bool live[QN_Q4_GROUP] = {};
  for (size_t k = 0; k < n; k++) v[k] = exact[k] ? 0.0f : w[k], live[k] = !exact[k];
  const float top = extreme<W>(v);  // the non-exact weight of largest magnitude, with its sign
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
  float u[QN_Q4_GROUP];  // the group in units of mx
  for (int k = 0; k < QN_Q4_GROUP; k++) u[k] = static_cast<float>(v[k] / mx);
  int32_t sc[kPadded];
  float f[kPadded], err[kPadded];  // each candidate's scale, step in units of mx, and squared error
  candidate_scales(-static_cast<double>(top) / 8.0 * p2, mx * p2, sc, f);
  grid_squared_errors<QN_Q4_GROUP, kPadded, W>(u, f, -8.0f, 7.0f, err);
  const int32_t best = least_error_scale(sc, err);
  if (best == 0) return;
  out.scale = best;
  const double to_code = p2 / static_cast<double>(best);
  for (int k = 0; k < QN_Q4_GROUP; k++) {
    const double c = std::clamp(std::nearbyint(static_cast<double>(v[k]) * to_code), -8.0, 7.0);
    out.codes[k] = live[k] ? static_cast<uint8_t>(static_cast<int>(c) + QN_Q4_CODE_BIAS) : out.codes[k];
  }
}

// Without FMA (not "arch=haswell"; AVX-512 implies it, hence fp-contract=off):
// all three compute the same bits, so the chosen scales do not depend on the CPU.
__attribute__((target("avx512f"), optimize("fp-contract=off"))) void quantize_avx512(const float* w,
                                                                                    const bool* exact, size_t n,
                                                                                    double p2, Q4Group& out) {
  quantize<16>(w, exact, n, p2, out);
}
__attribute__((target("avx2"))) void quantize_avx2(const float* w, const bool* exact, size_t n, double p2,
                                                   Q4Group& out) {
  quantize<8>(w, exact, n, p2, out);
}
void quantize_sse2(const float* w, const bool* exact, size_t n, double p2, Q4Group& out) {
  quantize<4>(w, exact, n, p2, out);
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

void q4_quantize_group(const float* w, const bool* exact, size_t n, double p2, Q4Group& out) {
  static const auto impl = __builtin_cpu_supports("avx512f") ? quantize_avx512
                           : __builtin_cpu_supports("avx2")  ? quantize_avx2
                                                             : quantize_sse2;
  impl(w, exact, n, p2, out);
}

}  // namespace qwen3::engine
