#include "engine/weight_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "op_args.h"

namespace qwen3::engine {

namespace {
// 2^frac as a double, without libm (ldexp is the conversion's hot spot).
double pow2(int frac) {
  double p = 1.0;
  for (int i = 0; i < frac; i++) p *= 2.0;
  for (int i = 0; i > frac; i--) p *= 0.5;
  return p;
}
// Round half away from zero (what llround does), for |v| < 2^62.
int64_t round_away(double v) { return static_cast<int64_t>(v >= 0 ? v + 0.5 : v - 0.5); }
}  // namespace

int32_t to_fixed(float w, int frac, const char* what) {
  double v = static_cast<double>(w) * pow2(frac);  // exact: a power of two
  if (!(std::fabs(v) < 2147483647.0))
    throw invalid_argument(std::string("weight ") + std::to_string(w) + " in " + what +
                           " is outside the fixed-point range (|w| < 2^" + std::to_string(31 - frac) + ")");
  return static_cast<int32_t>(round_away(v));
}

int weight_frac_for(double max_abs, Precision p, const char* what) {
  const bool q8 = p == Precision::q8;
  int frac = q8 ? QN_W8_FRAC : QN_W24_FRAC;
  const double top = q8 ? max_abs / 127.0 : max_abs;
  while (frac > QN_ACT_FRAC && std::ldexp(top, frac) >= 2147483000.0) frac--;
  if (!(std::ldexp(top, frac) < 2147483000.0))
    throw invalid_argument(std::string("weights of ") + what + " reach " + std::to_string(max_abs) +
                           ", beyond the engine's fixed-point range");
  return frac;
}

uint64_t convert_row(std::span<const float> w, Precision p, int frac, uint8_t* out, const char* what,
                     std::span<const uint32_t> ocols) {
  const bool q8 = p == Precision::q8;
  const uint32_t prec = static_cast<uint32_t>(p);
  const size_t cols = w.size();
  const uint32_t groups = qn_groups_for(static_cast<uint32_t>(cols));
  const double p2 = pow2(frac);
  uint64_t l1 = 0;
  auto is_out = [&](size_t c) { return std::find(ocols.begin(), ocols.end(), c) != ocols.end(); };
  for (size_t g = 0; g < groups; g++) {
    const size_t c0 = g * QN_GROUP;
    const size_t n = std::min<size_t>(QN_GROUP, cols - c0);
    if (!q8) {
      int32_t vals[QN_GROUP] = {};
      for (size_t k = 0; k < n; k++) {
        vals[k] = to_fixed(w[c0 + k], frac, what);
        l1 += static_cast<uint64_t>(std::llabs(vals[k]));
      }
      std::memcpy(out + qn_group_off(prec, g), vals, sizeof vals);
      continue;
    }
    bool exact[QN_GROUP] = {};
    float mx = 0.0f;
    for (size_t k = 0; k < n; k++) {
      exact[k] = is_out(c0 + k);
      if (!exact[k]) mx = std::max(mx, std::fabs(w[c0 + k]));
    }
    if (!(static_cast<double>(mx) / 127.0 * p2 < 2147483647.0))
      throw invalid_argument(std::string("weight magnitude ") + std::to_string(mx) + " in " + what +
                             " is outside the fixed-point range of its matrix");
    Q8Group qg;
    q8_quantize_group(&w[c0], exact, n, p2, qg);
    uint64_t qsum = 0;
    for (size_t k = 0; k < n; k++) qsum += static_cast<uint64_t>(std::abs(qg.codes[k]));
    const int32_t scale = qg.scale;
    const int8_t* q = qg.codes;
    uint8_t* gp = out + qn_group_off(prec, g);
    std::memcpy(gp, &scale, QN_Q8_SCALE_BYTES);
    std::memcpy(gp + QN_Q8_SCALE_BYTES, q, QN_GROUP);
    l1 += qsum * static_cast<uint64_t>(scale);
  }
  if (q8) {
    int64_t wo[QN_OUT_COLS] = {};
    for (size_t k = 0; k < ocols.size() && k < QN_OUT_COLS; k++) {
      wo[k] = round_away(static_cast<double>(w[ocols[k]]) * p2);
      l1 += static_cast<uint64_t>(std::llabs(wo[k]));
    }
    static_assert(sizeof wo == QN_OUT_TAIL_BYTES);
    std::memcpy(out + qn_q8_tail_off(groups), wo, sizeof wo);
  }
  return l1;
}

namespace {
// Row j of q8 block `blk` <-> row image `img` (layout.h); the codes are stored offset binary.
void q8_put(uint8_t* blk, uint32_t groups, uint32_t j, const uint8_t* img) {
  for (uint32_t g = 0; g < groups; g++) {
    const uint8_t* gp = img + qn_group_off(QN_PREC_Q8, g);
    std::memcpy(blk + qn_q8_bscale_off(g, j), gp, QN_Q8_SCALE_BYTES);
    for (uint32_t k = 0; k < QN_GROUP; k++)
      blk[qn_q8_bcol_off(g, k) + j] = static_cast<uint8_t>(gp[QN_Q8_SCALE_BYTES + k] + QN_Q8_CODE_BIAS);
  }
  std::memcpy(blk + qn_q8_btail_off(groups, j), img + qn_q8_tail_off(groups), QN_OUT_TAIL_BYTES);
}
void q8_get(const uint8_t* blk, uint32_t groups, uint32_t j, uint8_t* img) {
  for (uint32_t g = 0; g < groups; g++) {
    uint8_t* gp = img + qn_group_off(QN_PREC_Q8, g);
    std::memcpy(gp, blk + qn_q8_bscale_off(g, j), QN_Q8_SCALE_BYTES);
    for (uint32_t k = 0; k < QN_GROUP; k++)
      gp[QN_Q8_SCALE_BYTES + k] = static_cast<uint8_t>(blk[qn_q8_bcol_off(g, k) + j] - QN_Q8_CODE_BIAS);
  }
  std::memcpy(img + qn_q8_tail_off(groups), blk + qn_q8_btail_off(groups, j), QN_OUT_TAIL_BYTES);
}
}  // namespace

void store_row(uint8_t* weights, const MatrixPlan& mp, uint32_t r, const uint8_t* image) {
  const uint32_t prec = static_cast<uint32_t>(mp.precision);
  const uint32_t img_bytes = qn_row_bytes(prec, mp.m.groups);
  const uint32_t ur = mp.unit_rows();
  uint8_t* unit = weights + mp.unit_offset(r / ur);
  if (mp.precision != Precision::q8) {
    std::memcpy(unit, image, img_bytes);
    return;
  }
  q8_put(unit, mp.m.groups, r % ur, image);
  if (r + 1 == mp.rows) {
    const std::vector<uint8_t> zero(img_bytes, 0);  // code 0, scale 0, no outliers
    for (uint32_t j = r % ur + 1; j < ur; j++) q8_put(unit, mp.m.groups, j, zero.data());
  }
}

void load_row(const uint8_t* weights, const MatrixPlan& mp, uint32_t r, uint8_t* image) {
  const uint32_t ur = mp.unit_rows();
  const uint8_t* unit = weights + mp.unit_offset(r / ur);
  if (mp.precision != Precision::q8) {
    std::memcpy(image, unit, qn_row_bytes(static_cast<uint32_t>(mp.precision), mp.m.groups));
    return;
  }
  q8_get(unit, mp.m.groups, r % ur, image);
}

uint64_t convert_row_into(uint8_t* weights, const MatrixPlan& mp, uint32_t r, std::span<const float> w, int frac,
                          const char* what, std::span<const uint32_t> ocols) {
  if (mp.precision != Precision::q8)  // a q24 unit is the row image itself
    return convert_row(w, mp.precision, frac, weights + mp.unit_offset(r), what, ocols);
  thread_local std::vector<uint8_t> img;
  img.assign(qn_row_bytes(QN_PREC_Q8, mp.m.groups), 0);
  const uint64_t l1 = convert_row(w, mp.precision, frac, img.data(), what, ocols);
  store_row(weights, mp, r, img.data());
  return l1;
}

uint32_t act_bits_for(uint64_t max_l1, Precision p) {
  const bool q8 = p == Precision::q8;
  int b = qn_bits_u64(max_l1);
  int a = 62 - b;
  if (a > QN_ACT_BITS_MAX) a = QN_ACT_BITS_MAX;
  if (q8 && a > QN_Q8_ACT_BITS) a = QN_Q8_ACT_BITS;
  if (a < 1) a = 1;
  return static_cast<uint32_t>(a);
}

double dequant(const uint8_t* row, uint32_t c, Precision p, int frac, uint32_t cols,
               std::span<const uint32_t> ocols) {
  const bool q8 = p == Precision::q8;
  const uint32_t prec = static_cast<uint32_t>(p);
  const uint32_t g = c / QN_GROUP, k = c % QN_GROUP;
  for (size_t i = 0; q8 && i < ocols.size(); i++)
    if (ocols[i] == c) {
      int64_t v;
      std::memcpy(&v, row + qn_q8_tail_elem_off(qn_groups_for(cols), i), 8);
      return std::ldexp(static_cast<double>(v), -frac);
    }
  if (!q8) {
    int32_t v;
    std::memcpy(&v, row + qn_group_off(prec, g) + 4 * k, 4);
    return std::ldexp(static_cast<double>(v), -frac);
  }
  int32_t scale;
  std::memcpy(&scale, row + qn_group_off(prec, g), QN_Q8_SCALE_BYTES);
  int8_t q = static_cast<int8_t>(row[qn_group_off(prec, g) + QN_Q8_SCALE_BYTES + k]);
  return std::ldexp(static_cast<double>(q) * scale, -frac);
}

}  // namespace qwen3::engine
