/* The RoPE table's integer math (the qn_rope_table program at load, ops_rope.h,
 * and its C++ model rope_table_model): Q62 series for 2^-x and sin / cos.
 * Compiles as BPF C and as C++, like numerics.h.
 */
#ifndef QWEN3_BPF_NUMERICS_ROPE_H
#define QWEN3_BPF_NUMERICS_ROPE_H

#include "numerics.h"

/* ---- RoPE table (the qn_rope_table program at load) --------------------------
 * cos / sin(pos * theta^(-2i/d)) in Q30 from integers alone:
 *   L   = log2(theta) in Q57, theta given in Q16 (qn_log2_q16_q57, numerics.h:
 *         bit by bit, square a Q62 mantissa, each square >= 2 is a one bit)
 *   f_i = theta^(-2i/d) / (2 pi) in Q64 turns: 2^-e = 2^(1-frac) * 2^-(n+1)
 *         with e = n + frac, 2^(1-frac) by its Taylor series in Q62
 *   t   = pos * f_i mod 2^64: the angle's fraction of a turn; the wrap-around
 *         of the unsigned product is the exact reduction mod 2 pi
 *   cos, sin of 2 pi t: octant reduction, Taylor series on [0, pi/4] in Q62,
 *         rounded to Q30.
 * Errors: ~2^-57 relative in f_i, so ~2^-42 turns of phase at 2^15 positions;
 * the result is the correctly rounded Q30 value or 1 unit off (docs/numerics.md). */
#define QN_INV_2PI_Q66 11743562013128004906ULL /* 2^66 / (2 pi) */
#define QN_TWO_PI_Q61 14488038916154245685ULL  /* 2 pi * 2^61 */

/* 2^-e in Q62 for e >= 0 given in Q57 (0 below 2^-62). */
QN_INLINE qn_u64 qn_exp2_neg_q62(qn_u64 e) {
  qn_u64 n = e >> 57;
  qn_u64 f = e & ((1ULL << 57) - 1);
  qn_u64 x = qn_mul_q62(((1ULL << 57) - f) << 5, QN_LN2_Q62); /* (1 - f) ln 2 in (0, ln 2], Q62 */
  qn_u64 term = QN_ONE_Q62, sum = QN_ONE_Q62 >> 1;           /* sum: exp(x) in Q61, in (1, 2] */
  for (qn_u64 k = 1; k <= 24; k++) {                          /* x^25 / 25! < 2^-80 */
    term = qn_mul_q62(term, x) / k;
    sum += term >> 1;
  }
  return n >= 63 ? 0 : sum >> n; /* 2^(1-f) * 2^-(n+1) in Q62 */
}

/* theta^(-2i/d) / (2 pi) in Q64 turns (i < d/2), from L = log2(theta) in Q57. */
QN_INLINE qn_u64 qn_rope_freq_q64(qn_u64 log2_theta_q57, qn_u32 i, qn_u32 d) {
  qn_u64 e = log2_theta_q57 / d * (2 * i);
  return qn_mulhi_u64(qn_exp2_neg_q62(e), QN_INV_2PI_Q66);
}

/* Q62 -> Q30, rounded, with a sign. */
QN_INLINE qn_s32 qn_q62_to_q30(qn_u64 v, int neg) {
  qn_s32 r = (qn_s32)((v + (1ULL << 31)) >> 32);
  return neg ? -r : r;
}

/* cos and sin of 2 pi t, t in Q64 turns, in Q30. */
QN_INLINE void qn_sincos_turns(qn_u64 t, qn_s32 *cos_q30, qn_s32 *sin_q30) {
  qn_u64 oct = t >> 61;
  qn_u64 r = t & ((1ULL << 61) - 1); /* within the octant, Q64 turns (< 1/8 turn) */
  qn_u64 odd = oct & 1;
  if (odd) r = (1ULL << 61) - r;     /* odd octant: the angle to the quadrant's end */
  qn_u64 x = qn_mulhi_u64(r << 1, QN_TWO_PI_Q61); /* radians in [0, pi/4], Q62 */
  qn_u64 x2 = qn_mul_q62(x, x);
  qn_u64 ts = QN_ONE_Q62, tc = QN_ONE_Q62;
  for (qn_u64 k = 7; k >= 1; k--) { /* Horner; x^15 / 15! < 2^-41 */
    ts = QN_ONE_Q62 - qn_mul_q62(x2, ts) / ((2 * k) * (2 * k + 1));
    tc = QN_ONE_Q62 - qn_mul_q62(x2, tc) / ((2 * k - 1) * (2 * k));
  }
  qn_u64 sx = qn_mul_q62(x, ts), cx = tc;
  qn_u64 sp = odd ? cx : sx, cp = odd ? sx : cx; /* sin, cos within the quadrant */
  qn_u64 q = oct >> 1;
  /* quadrant q turns (cos, sin) of the angle by q * 90 degrees */
  if (q == 0) { *cos_q30 = qn_q62_to_q30(cp, 0); *sin_q30 = qn_q62_to_q30(sp, 0); }
  else if (q == 1) { *cos_q30 = qn_q62_to_q30(sp, 1); *sin_q30 = qn_q62_to_q30(cp, 0); }
  else if (q == 2) { *cos_q30 = qn_q62_to_q30(cp, 1); *sin_q30 = qn_q62_to_q30(sp, 1); }
  else { *cos_q30 = qn_q62_to_q30(sp, 0); *sin_q30 = qn_q62_to_q30(cp, 1); }
}

#endif
