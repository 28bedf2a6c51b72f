#include "engine/weight_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/q4_quantizer.h"
#include "engine/quant_rounding.h"
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
}  // namespace

int32_t to_fixed(float w, int frac, const char* what) {
  double v = static_cast<double>(w) * pow2(frac);  // exact: a power of two
  if (!(std::fabs(v) < 2147483647.0))
    throw invalid_argument(std::string("weight ") + std::to_string(w) + " in " + what +
                           " is outside the fixed-point range (|w| < 2^" + std::to_string(31 - frac) + ")");
  return static_cast<int32_t>(round_away_from_zero(v));
}

int weight_frac_for(double max_abs, Precision p, const char* what) {
  const bool q24 = p == Precision::q24;
  int frac = q24 ? QN_W24_FRAC : QN_W8_FRAC;
  // the largest int32 stored: q8 a scale near max / 127; q24 a weight; q4 a
  // scale, at most max (q4_quantizer.h: a grid step kept from a checkpoint)
  const double top = has_q8_rows(p) ? max_abs / 127.0 : max_abs;
  while (frac > QN_ACT_FRAC && std::ldexp(top, frac) >= 2147483000.0) frac--;
  if (!(std::ldexp(top, frac) < 2147483000.0))
    throw invalid_argument(std::string("weights of ") + what + " reach " + std::to_string(max_abs) +
                           ", beyond the engine's fixed-point range");
  return frac;
}

namespace {

// The outlier tail (layout.h) of a q8 or q4 row image: exact int64 weights.
uint64_t put_outlier_tail(std::span<const float> w, std::span<const uint32_t> ocols, double p2, uint8_t* tail) {
  int64_t wo[QN_OUT_COLS] = {};
  uint64_t l1 = 0;
  for (size_t k = 0; k < ocols.size() && k < QN_OUT_COLS; k++) {
    wo[k] = round_away_from_zero(static_cast<double>(w[ocols[k]]) * p2);
    l1 += static_cast<uint64_t>(std::llabs(wo[k]));
  }
  static_assert(sizeof wo == QN_OUT_TAIL_BYTES);
  std::memcpy(tail, wo, sizeof wo);
  return l1;
}

// q4 (layout.h): per group two halves of QN_Q4_GROUP columns, each a scale
// and its codes; then the outlier tail.
uint64_t convert_row_q4(std::span<const float> w, int frac, uint8_t* out, const char* what,
                        std::span<const uint32_t> ocols) {
  const size_t cols = w.size();
  const uint32_t groups = qn_groups_for(static_cast<uint32_t>(cols));
  const double p2 = pow2(frac);
  uint64_t l1 = 0;
  for (uint32_t g = 0; g < groups; g++)
    for (uint32_t h = 0; h < 2; h++) {
      const size_t c0 = size_t(g) * QN_GROUP + h * QN_Q4_GROUP;
      const size_t n = c0 < cols ? std::min<size_t>(QN_Q4_GROUP, cols - c0) : 0;
      bool exact[QN_Q4_GROUP] = {};
      float mx = 0.0f;
      for (size_t k = 0; k < n; k++) {
        exact[k] = std::find(ocols.begin(), ocols.end(), c0 + k) != ocols.end();
        if (!exact[k]) mx = std::max(mx, std::fabs(w[c0 + k]));
      }
      if (!(static_cast<double>(mx) * p2 < 2147483647.0))
        throw invalid_argument(std::string("weight magnitude ") + std::to_string(mx) + " in " + what +
                               " is outside the fixed-point range of its matrix");
      Q4Group qg;
      q4_quantize_group(n ? &w[c0] : nullptr, exact, n, p2, qg);
      uint64_t qsum = 0;
      for (int k = 0; k < QN_Q4_GROUP; k++) qsum += static_cast<uint64_t>(std::abs(int(qg.codes[k]) - QN_Q4_CODE_BIAS));
      uint8_t* hp = out + qn_q4_img_half_off(g, h);
      std::memcpy(hp, &qg.scale, 4);
      std::memcpy(hp + 4, qg.codes, QN_Q4_GROUP);
      l1 += qsum * static_cast<uint64_t>(std::llabs(qg.scale));
    }
  return l1 + put_outlier_tail(w, ocols, p2, out + qn_q4_tail_off(groups));
}

}  // namespace

uint64_t convert_row(std::span<const float> w, Precision p, int frac, uint8_t* out, const char* what,
                     std::span<const uint32_t> ocols) {
  if (p == Precision::q4) return convert_row_q4(w, frac, out, what, ocols);
  const bool q8 = has_q8_rows(p);
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
  if (q8) l1 += put_outlier_tail(w, ocols, p2, out + qn_q8_tail_off(groups));
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

// Row j of q4 block `blk` <-> row image `img`. Rows j and j ^ 1 share a
// byte of every column word, and workers may store them at once: row j's
// nibble (byte j / 2 of the little-endian word) is turned into the code by
// one atomic xor, which leaves the other row's bits. Only this store writes
// row j, so the nibble it reads first is exact; one already right (a
// rewrite) is left alone. One locked instruction per code, not two: they
// were the q4 conversion's largest cost after the scale search.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "q4 nibble j is in byte j / 2 of its column word");
void q4_put(uint8_t* blk, uint32_t groups, uint32_t j, const uint8_t* img) {
  const uint32_t shift = 4 * (j % 2);
  for (uint32_t gq = 0; gq < 2 * groups; gq++) {
    const uint8_t* hp = img + qn_q4_img_half_off(gq / 2, gq % 2);
    std::memcpy(blk + qn_q4_bscale_off(gq, j), hp, 4);
    uint16_t sum = 0;
    for (uint32_t k = 0; k < QN_Q4_GROUP; k++) {
      const uint32_t code = hp[4 + k] & 15u;
      sum = static_cast<uint16_t>(sum + code);
      uint8_t* pair = blk + qn_q4_bcol_off(gq, k) + j / 2;
      const uint32_t now = (__atomic_load_n(pair, __ATOMIC_RELAXED) >> shift) & 15u;
      if (now != code) __atomic_fetch_xor(pair, static_cast<uint8_t>((now ^ code) << shift), __ATOMIC_RELAXED);
    }
    std::memcpy(blk + qn_q4_bcsum_off(gq, j), &sum, 2);
  }
  std::memcpy(blk + qn_q4_btail_off(groups, j), img + qn_q4_tail_off(groups), QN_OUT_TAIL_BYTES);
}
void q4_get(const uint8_t* blk, uint32_t groups, uint32_t j, uint8_t* img) {
  for (uint32_t gq = 0; gq < 2 * groups; gq++) {
    uint8_t* hp = img + qn_q4_img_half_off(gq / 2, gq % 2);
    std::memcpy(hp, blk + qn_q4_bscale_off(gq, j), 4);
    for (uint32_t k = 0; k < QN_Q4_GROUP; k++) {
      uint64_t col;
      std::memcpy(&col, blk + qn_q4_bcol_off(gq, k), 8);
      hp[4 + k] = static_cast<uint8_t>((col >> (4 * j)) & 15u);
    }
  }
  std::memcpy(img + qn_q4_tail_off(groups), blk + qn_q4_btail_off(groups, j), QN_OUT_TAIL_BYTES);
}

// Row j of q8a8 block `blk` <-> row image `img` (layout.h). Row j owns the
// 8-bit field of its code in every column word and its lane field in its
// accumulator's start values: lanes 0 and 1 hold 2^20 - 128 W (W: the row's
// offset code sum over the half, so 3,096 .. 2^20: no borrow), the top lane
// -128 W in bits 42..63. Fields are disjoint, so, as in q4_put, each one is
// turned into its value by one atomic xor and workers may store rows of one
// block at once.
void xor_field(uint8_t* word_at, uint64_t value, uint32_t shift, uint64_t mask) {
  uint64_t* word = reinterpret_cast<uint64_t*>(word_at);
  const uint64_t now = (__atomic_load_n(word, __ATOMIC_RELAXED) >> shift) & mask;
  if (now != (value & mask)) __atomic_fetch_xor(word, (now ^ (value & mask)) << shift, __ATOMIC_RELAXED);
}
void q8a8_put(uint8_t* blk, uint32_t groups, uint32_t j, const uint8_t* img) {
  const uint32_t shift = qn_q8a8_code_shift(j), w = qn_q8a8_word(j), lane = qn_q8a8_lane(j);
  const uint32_t lane_shift = QN_Q8A8_LANE_BITS * lane;
  const uint64_t lane_mask = lane == 2 ? (uint64_t(1) << (64 - lane_shift)) - 1 : QN_Q8A8_LANE_MASK;
  for (uint32_t g = 0; g < groups; g++) {
    const uint8_t* gp = img + qn_group_off(QN_PREC_Q8, g);
    std::memcpy(blk + qn_q8a8_bscale_off(g, j), gp, QN_Q8_SCALE_BYTES);
    for (uint32_t h = 0; h < QN_GROUP / QN_A8_GROUP; h++) {
      int64_t code_sum = 0;  // W: offset codes
      for (uint32_t k = 0; k < QN_A8_GROUP; k++) {
        const uint8_t code = static_cast<uint8_t>(gp[QN_Q8_SCALE_BYTES + h * QN_A8_GROUP + k] + QN_Q8_CODE_BIAS);
        code_sum += code;
        xor_field(blk + qn_q8a8_bword_off(g, h, k, w), code, shift, 0xFF);
      }
      const int64_t field = (lane == 2 ? 0 : QN_Q8A8_LANE_BIAS) - QN_A8_BIAS * code_sum;
      xor_field(blk + qn_q8a8_bstart_off(g, h, qn_q8a8_acc(j)), static_cast<uint64_t>(field), lane_shift, lane_mask);
    }
  }
  std::memcpy(blk + qn_q8a8_btail_off(groups, j), img + qn_q8_tail_off(groups), QN_OUT_TAIL_BYTES);
}
void q8a8_get(const uint8_t* blk, uint32_t groups, uint32_t j, uint8_t* img) {
  const uint32_t shift = qn_q8a8_code_shift(j), w = qn_q8a8_word(j);
  for (uint32_t g = 0; g < groups; g++) {
    uint8_t* gp = img + qn_group_off(QN_PREC_Q8, g);
    std::memcpy(gp, blk + qn_q8a8_bscale_off(g, j), QN_Q8_SCALE_BYTES);
    for (uint32_t k = 0; k < QN_GROUP; k++) {
      uint64_t v;
      std::memcpy(&v, blk + qn_q8a8_bword_off(g, k / QN_A8_GROUP, k % QN_A8_GROUP, w), 8);
      gp[QN_Q8_SCALE_BYTES + k] = static_cast<uint8_t>(((v >> shift) & 0xFF) - QN_Q8_CODE_BIAS);
    }
  }
  std::memcpy(img + qn_q8_tail_off(groups), blk + qn_q8a8_btail_off(groups, j), QN_OUT_TAIL_BYTES);
}

// The row image of a padding row: weight 0 (q4: code 8, scale 0; q8: code 0).
std::vector<uint8_t> padding_row(Precision p, uint32_t groups) {
  std::vector<uint8_t> img(qn_row_bytes(static_cast<uint32_t>(p), groups), 0);
  if (p == Precision::q4)
    for (uint32_t gq = 0; gq < 2 * groups; gq++)
      std::memset(img.data() + qn_q4_img_half_off(gq / 2, gq % 2) + 4, QN_Q4_CODE_BIAS, QN_Q4_GROUP);
  return img;
}
}  // namespace

void store_row(uint8_t* weights, const MatrixPlan& mp, uint32_t r, const uint8_t* image) {
  const uint32_t prec = static_cast<uint32_t>(mp.precision);
  const uint32_t img_bytes = qn_row_bytes(prec, mp.m.groups);
  const uint32_t ur = mp.unit_rows();
  uint8_t* unit = weights + mp.unit_offset(r / ur);
  if (mp.precision == Precision::q24) {
    std::memcpy(unit, image, img_bytes);
    return;
  }
  const auto put = mp.precision == Precision::q4 ? q4_put : mp.precision == Precision::q8a8 ? q8a8_put : q8_put;
  put(unit, mp.m.groups, r % ur, image);
  if (r + 1 == mp.rows) {
    const std::vector<uint8_t> pad = padding_row(mp.precision, mp.m.groups);
    for (uint32_t j = r % ur + 1; j < ur; j++) put(unit, mp.m.groups, j, pad.data());
  }
}

void load_row(const uint8_t* weights, const MatrixPlan& mp, uint32_t r, uint8_t* image) {
  const uint32_t ur = mp.unit_rows();
  const uint8_t* unit = weights + mp.unit_offset(r / ur);
  if (mp.precision == Precision::q24) {
    std::memcpy(image, unit, qn_row_bytes(static_cast<uint32_t>(mp.precision), mp.m.groups));
    return;
  }
  const auto get = mp.precision == Precision::q4 ? q4_get : mp.precision == Precision::q8a8 ? q8a8_get : q8_get;
  get(unit, mp.m.groups, r % ur, image);
}

uint64_t convert_row_into(uint8_t* weights, const MatrixPlan& mp, uint32_t r, std::span<const float> w, int frac,
                          const char* what, std::span<const uint32_t> ocols) {
  if (mp.precision == Precision::q24)  // a q24 unit is the row image itself
    return convert_row(w, mp.precision, frac, weights + mp.unit_offset(r), what, ocols);
  thread_local std::vector<uint8_t> img;
  img.assign(qn_row_bytes(static_cast<uint32_t>(mp.precision), mp.m.groups), 0);
  const uint64_t l1 = convert_row(w, mp.precision, frac, img.data(), what, ocols);
  store_row(weights, mp, r, img.data());
  return l1;
}

uint32_t act_bits_for(uint64_t max_l1, Precision p) {
  int b = qn_bits_u64(max_l1);
  int a = 62 - b;
  if (a > QN_ACT_BITS_MAX) a = QN_ACT_BITS_MAX;
  // q8's packed lanes and q4's 8-bit input scales need |x| <= 2^QN_Q8_ACT_BITS
  if (p != Precision::q24 && a > QN_Q8_ACT_BITS) a = QN_Q8_ACT_BITS;
  if (a < 1) a = 1;
  return static_cast<uint32_t>(a);
}

double dequant(const uint8_t* row, uint32_t c, Precision p, int frac, uint32_t cols,
               std::span<const uint32_t> ocols) {
  const bool q8 = has_q8_rows(p);
  const uint32_t prec = static_cast<uint32_t>(p);
  const uint32_t g = c / QN_GROUP, k = c % QN_GROUP;
  for (size_t i = 0; p != Precision::q24 && i < ocols.size(); i++)
    if (ocols[i] == c) {
      int64_t v;
      std::memcpy(&v, row + qn_group_off(prec, qn_groups_for(cols)) + 8 * i, 8);
      return std::ldexp(static_cast<double>(v), -frac);
    }
  if (p == Precision::q4) {
    const uint8_t* hp = row + qn_q4_img_half_off(g, k / QN_Q4_GROUP);
    int32_t scale;
    std::memcpy(&scale, hp, 4);
    return std::ldexp(static_cast<double>(int(hp[4 + k % QN_Q4_GROUP]) - QN_Q4_CODE_BIAS) * scale, -frac);
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
