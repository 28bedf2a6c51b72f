/* K/V quantization (the int16 layout and the compact 9 + 7-bit words) and the
 * attention arithmetic over them (qn_attention, ops_attention.h, and its C++
 * model in tests/bpf/fixed_model.h). Compiles as BPF C and as C++, like
 * numerics.h. docs/kv-cache.md describes the formats.
 */
#ifndef QWEN3_BPF_NUMERICS_KV_H
#define QWEN3_BPF_NUMERICS_KV_H

#include "numerics.h"

#define QN_KV_LEVELS16 32767  /* int16 K/V: value = q * max / 32767 */

/* ---- K/V quantization, int16 layout (kv_bits = 16) -------------------------------
 * One scale per (position, layer, kv head, K|V): the vector's max |x| in Q16.
 * q = round(x * L / max), value ~= q * max / L, L = 32767. */
QN_INLINE qn_s32 qn_kv_quant(qn_s32 x, qn_s32 max_abs, qn_s32 levels) {
  qn_s64 d = qn_max64(max_abs, 1); /* an all-zero vector quantizes to zeros */
  qn_s64 q = qn_div_round((qn_s64)x * levels, d);
  return (qn_s32)qn_max64(qn_min64(q, levels), -levels);
}
/* int16 dot products are pre-shifted by 8 bits so dot * max stays < 2^62. */
QN_INLINE int qn_kv_dot_shift(qn_s32 levels) { return levels == QN_KV_LEVELS16 ? 8 : 0; }

/* ---- attention ------------------------------------------------------------------
 * Query requantized like a matmul input to |q >> sq| <= 2^17; the score of one
 * cached key: dot = sum (q >> sq) * kq >> ds (|dot| < 2^30 for head_dim <= 256;
 * ds = 8 for int16 K), then
 * score_Q16 = dot * kmax * 2^(sq + ds) / (L * 2^16 * sqrt(d)),
 * with c = 2^(24 + ds) / (L * sqrt(d)) computed in the kernel by qn_rsqrt_q30. */
#define QN_Q_BITS 17
QN_INLINE qn_s64 qn_attn_scale_q24(qn_u32 head_dim, qn_s32 levels) {
  int e = 0;
  qn_s64 r = qn_rsqrt_q30(head_dim, &e);                         /* 1/sqrt(d) = r * 2^-e */
  qn_s64 c = qn_round_shift(r, e - 24 - qn_kv_dot_shift(levels)); /* Q(24 + ds) */
  return qn_div_round(c, levels);
}

QN_INLINE qn_s32 qn_attn_score(qn_s64 dot, qn_s32 kmax, int sq, qn_s64 c_q24) {
  qn_s64 t = qn_round_shift(dot * (qn_s64)kmax, 16); /* |t| < 2^45 */
  return qn_sat32(qn_round_shift(t * c_q24, 24 - sq));
}

/* Probability of one position in Q30 from its exp weight and the sum. */
QN_INLINE qn_s64 qn_attn_prob(qn_s64 e_q30, qn_u64 sum) {
  return (qn_s64)((((qn_u64)e_q30 << 30) + sum / 2) / sum);
}

/* Weight of one cached value vector: p * vmax in Q24 (8 bits below the Q16
 * activation step, |w| <= vmax * 2^8; sum_i w_i * vq_i < 2^31 * 2^8 * 2^15). */
#define QN_VW_EXTRA 8
QN_INLINE qn_s64 qn_attn_vweight(qn_s64 p_q30, qn_s32 vmax) {
  return qn_round_shift(p_q30 * (qn_s64)vmax, 30 - QN_VW_EXTRA);
}

/* Output element from sum_i w_i * vq_i: divide the L levels back out. */
QN_INLINE qn_s32 qn_attn_out(qn_s64 acc, qn_s32 levels) {
  return qn_sat32(qn_div_round(acc, (qn_s64)levels << QN_VW_EXTRA));
}

/* ---- compact K/V: 9-bit K + 7-bit V words, in-band scales (kv_bits = 8) --------
 * Exactly one byte per cached value on average (docs/kv-cache.md): element d
 * of a kv head's K and V share one 16-bit word, K code (9 bits, +-255) in the
 * top bits, V code (7 bits, +-63) in the low 7: K needs the precision more
 * (measured). With QN_KV8_ROTATE, each K (after RoPE) and
 * V vector is rotated by an integer Walsh-Hadamard transform in blocks of
 * B = 2^lb (the largest power of two dividing head_dim): y = H x, H H^T = B I,
 * exact in int64. The rotation spreads outlier channels over the whole block,
 * so one per-vector scale no longer starves the small components. The query is
 * rotated the same way (q.k = (Hq).(Hk) / B) and the attention output is
 * rotated back (sum p v = H (sum p Hv) / B).
 * The vector's scale is a log code e (8 bits, 8 steps per octave):
 * S(e) = mant(e & 7) << (e >> 3) = (the quantization max in Q16) * 2^8,
 * mant(k) = round(2^(15 + k/8)), e <= 247: covers max |y| from 2^-9 (where
 * the step reaches the Q16 step) to 2^21.9 (real; any rotated int32 vector
 * up to 2^38 in Q16 but an all-saturated one).
 * The bits of K's code ride in the least significant bits of K codes 0..7,
 * V's in those of K codes 8..15: these codes are the nearest level of the
 * required parity (error <= 1 level instead of 1/2), and every code is read
 * as a plain value. */
#ifndef QN_KV8_ROTATE
#define QN_KV8_ROTATE 1
#endif
#define QN_KV8_K_LEVELS 255 /* 9-bit K codes */
#define QN_KV8_V_LEVELS 63  /* 7-bit V codes */
#define QN_KV8_V_BITS 7
#define QN_KV8_UNIT_SHIFT 8 /* S(e) is the quantization max (Q16) times 2^8 */
#define QN_KV8_CODE_MAX 247 /* octave <= 30 keeps the value weights below 2^47 */
#define QN_KV8_SCALE_CODES 8 /* K codes 0..7 carry K's scale code, 8..15 V's */

/* Mantissa of scale code k (0..7): 2^15 * 2^(k/8), rounded, read from two
 * words of four 16-bit entries without a branch. A switch forked the
 * verifier's state 8 ways per use, per cached position, and kernel 6.18.44
 * then stopped qn_attention at its 1M limit. */
#define QN_KV8_MANT_0123 0xA5FF98388B968000ULL /* 42495 38968 35734 32768 */
#define QN_KV8_MANT_4567 0xEAC1D745C567B505ULL /* 60097 55109 50535 46341 */
QN_INLINE qn_s64 qn_kv8_mant(qn_s64 k) {
  qn_u64 upper = (qn_u64)((k >> 2) & 1);
  qn_u64 word = QN_KV8_MANT_0123 + (QN_KV8_MANT_4567 - QN_KV8_MANT_0123) * upper;
  return (qn_s64)((word >> (16 * (k & 3))) & 0xffff);
}
QN_INLINE qn_s64 qn_kv8_scale(qn_s64 e) { return qn_kv8_mant(e & 7) << (e >> 3); }

/* log2 of the Hadamard block: the lowest set bit of head_dim (head_dim <= 256);
 * 0 (no rotation) without QN_KV8_ROTATE. */
QN_INLINE int qn_kv8_block_log2(qn_u32 head_dim) {
  int lb = 0;
  if (!QN_KV8_ROTATE) return 0;
  while (lb < 8 && !((head_dim >> lb) & 1)) lb++;
  return lb;
}

/* Smallest code e with S(e) >= max_abs * 2^8 (no clipping); 247 if none. */
QN_INLINE qn_s64 qn_kv8_code(qn_u64 max_abs) {
  qn_u64 m = (qn_u64)qn_min64((qn_s64)max_abs, 1LL << 40) << QN_KV8_UNIT_SHIFT;
  qn_s64 oct = qn_max64(qn_bits_u64(m) - 16, 0); /* mant << oct spans [2^(15+oct), 2^(16+oct)) */
  qn_s64 k = 0;
#ifndef __cplusplus
#pragma unroll
#endif
  for (int i = 0; i < 8; i++) k += qn_sign_bit((qn_kv8_mant(i) << oct) - (qn_s64)m); /* mantissas below m */
  qn_s64 e = oct * 8 + k; /* k == 8 rolls over to the next octave's first mantissa */
  return qn_min64(e, QN_KV8_CODE_MAX);
}

/* Code of one (rotated) element y (|y| < 2^46) at scale code e with L levels
 * (255 or 63): round(y * L / max). */
QN_INLINE qn_s32 qn_kv8_quant(qn_s64 y, qn_s64 e, qn_s64 levels) {
  qn_s64 q = qn_div_round(y * (levels << QN_KV8_UNIT_SHIFT), qn_kv8_scale(e));
  return (qn_s32)qn_max64(qn_min64(q, levels), -levels);
}
/* The same, restricted to codes whose least significant bit is `bit` (L odd). */
QN_INLINE qn_s32 qn_kv8_quant_bit(qn_s64 y, qn_s64 e, qn_s64 bit, qn_s64 levels) {
  qn_s64 s = qn_kv8_scale(e);
  qn_s64 h = qn_div_round(y * (levels << QN_KV8_UNIT_SHIFT) - bit * s, 2 * s);
  h = qn_max64(qn_min64(h, levels / 2), -(levels / 2) - bit);
  return (qn_s32)(2 * h + bit);
}
/* The shared word of element d: K code above the 7 V bits. */
QN_INLINE qn_s32 qn_kv8_word(qn_s32 kcode, qn_s32 vcode) {
  return kcode * (1 << QN_KV8_V_BITS) + (vcode & ((1 << QN_KV8_V_BITS) - 1));
}
QN_INLINE qn_s64 qn_kv8_kcode(qn_s64 word) { return word >> QN_KV8_V_BITS; }
QN_INLINE qn_s64 qn_kv8_vcode(qn_s64 word) { return (qn_s64)((qn_u64)word << (64 - QN_KV8_V_BITS)) >> (64 - QN_KV8_V_BITS); }

/* Score of one cached key from dot = sum (Hq >> sq)_i * code_i (|dot| < 2^31):
 * score_Q16 = dot * S(e) * 2^(sq - 8) / (255 * 2^16 * B * sqrt(d))
 *           = (dot * mant >> 16) * c_q24 >> (32 + lb - sq - oct),
 * c_q24 = qn_attn_scale_q24(head_dim, 255) = 2^24 / (255 sqrt(d)). */
QN_INLINE qn_s32 qn_kv8_score(qn_s64 dot, qn_s64 e, int sq, int lb, qn_s64 c_q24) {
  qn_s64 t = qn_round_shift(dot * qn_kv8_mant(e & 7), 16) * c_q24; /* < 2^48 */
  qn_s64 sh = 24 + QN_KV8_UNIT_SHIFT + lb - sq - (e >> 3);
  qn_s64 up = qn_min64(qn_max64(-sh, 0), 14); /* only for absurdly large q and k: saturates */
  return qn_sat32(qn_round_shift(t << up, (int)qn_max64(sh, 0)));
}

/* Two query heads share each 64-bit multiply of the compact layout's
 * attention (ops_attention.h): the operand x0 + x1 * 2^32 times y sums to
 * s0 + s1 * 2^32 (mod 2^64), and both lane sums come back exactly while
 * |s0|, |s1| < 2^31. Hence the query's 15 bits, not 17: |sum q * kcode| <=
 * 2^15 * 255 * 256 < 2^31 for head_dim <= 256 (model_plan), and value weights
 * of at most 2^24 (below). */
#define QN_KV8_Q_BITS 15
QN_INLINE qn_u64 qn_lanes(qn_s64 x0, qn_s64 x1) { return (qn_u64)x0 + ((qn_u64)x1 << 32); }
QN_INLINE qn_s64 qn_lane_lo(qn_u64 t) { return (qn_s64)(qn_s32)(qn_u32)t; }
QN_INLINE qn_s64 qn_lane_hi(qn_u64 t) { return (qn_s64)(t - (qn_u64)qn_lane_lo(t)) >> 32; }

/* Weight of one cached value vector, relative to m, the largest V scale
 * octave (e >> 3) over the cached positions: p * mant(e) * 2^(oct - m - 22)
 * <= 2^30 * 60097 * 2^-22 < 2^24. Then sum_i w_i <= (2^30 + n/2) * 60097 *
 * 2^-22 + n/2 (each rounding adds <= 1/2) and 63 * sum_i w_i < 2^31 for any
 * n < 2^20 cached positions: the lanes above hold. */
#define QN_KV8_VW_SHIFT 22
QN_INLINE qn_s64 qn_kv8_vweight(qn_s64 p_q30, qn_s64 e, qn_s64 m) {
  return qn_round_shift(p_q30 * qn_kv8_mant(e & 7), (int)(QN_KV8_VW_SHIFT + m - (e >> 3)));
}
/* Rotated output element, 8 bits finer than Q16, from sum_i w_i * vcode_i:
 * w_i * 2^(m - 8) is p * S(e) in the Q24 of the int16 layout's weights. */
QN_INLINE qn_s64 qn_kv8_out_rot(qn_s64 acc, qn_s64 m) {
  return qn_div_round(acc * ((qn_s64)1 << m), (qn_s64)QN_KV8_V_LEVELS << (30 - QN_KV8_VW_SHIFT));
}
/* Output element (Q16) from the back-rotated sum H * out_rot. */
QN_INLINE qn_s32 qn_kv8_out(qn_s64 z, int lb) { return qn_sat32(qn_round_shift(z, QN_VW_EXTRA + lb)); }

/* exp(d) in Q30 for d <= 0 in Q16, as attention's softmax weights it: the
 * octaves t = -d * log2(e) in Q16 as in qn_exp_neg_q30, then 2^-frac(t) by
 * the two tables (one product, one rounding) instead of 16 chained factors.
 * Exactly 2^30 at d = 0 (the softmax's largest weight) and exactly 0 from
 * QN_EXP_ZERO_Q16 below. */
QN_INLINE qn_s64 qn_attn_exp_q30(qn_s64 d_q16) {
  qn_u64 a = (qn_u64)qn_min64(qn_max64(-d_q16, 0), 1LL << 26);
  qn_u64 t = (a * (qn_u64)QN_LOG2E_Q30 + (1ULL << 29)) >> 30;
  qn_s64 n = qn_min64((qn_s64)(t >> 16), 40);
  qn_u64 r = ((qn_u64)qn_exp2_t1[(t >> 8) & 255] * qn_exp2_t2[t & 255] + (1ULL << 29)) >> 30;
  return qn_round_shift((qn_s64)r, (int)n);
}

/* Compact layout: the probability of a position, p = e * 2^30 / sum, as one
 * product with inv = floor(2^62 / sum), computed once per head (no division
 * per position). sum >= e (the max's weight is in it), so p <= 2^30. */
QN_INLINE qn_u64 qn_kv8_prob_inv(qn_u64 sum) { return (1ULL << 62) / sum; }
QN_INLINE qn_s64 qn_kv8_prob(qn_s64 e_q30, qn_u64 inv) {
  return (qn_s64)(((qn_u64)e_q30 * inv + (1ULL << 31)) >> 32);
}

#endif
