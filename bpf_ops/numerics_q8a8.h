/* q8 weights x 8-bit inputs in 21-bit lanes ("q8a8"): the scalar arithmetic
 * (the block layout is layout.h's), compiled as BPF C by the kernel
 * (kernel_q8a8.h) and as C++ by its models, so both compute the same integers.
 *
 * The weights are today's q8 weights (layout.h: int8 codes c, one scale per
 * row and QN_GROUP columns); the input is quantized per QN_A8_GROUP columns
 * as q4a8's (numerics_q4a8.h: q in -127..127 stored as u = q + 128, scale xs).
 * Both operands offset to 0..255 make each product < 2^16, and the 32
 * products of one input group sum to at most 32 * 255 * 255 < 2^21, so a u64
 * holds three 21-bit lanes that take a whole input group without spreading.
 *
 * A block is QN_Q8A8_BLOCK_ROWS rows; per weight group g (QN_GROUP columns):
 *   int32 scale [12] (row j), then per half h (QN_A8_GROUP columns, one input
 *   group): u64 start [4] (accumulator a's start value, below), then per
 *   column k two u64 words: word w holds rows 6w .. 6w+5 as
 *     V = w0 | w3 << 8 | w1 << 21 | w4 << 29 | w2 << 42 | w5 << 50
 *   (w = c + 128), so V & QN_Q8A8_CODES puts rows 0, 1, 2 of the word in the
 *   three lanes and V >> 8 rows 3, 4, 5 (with rows 1 and 2 at bits 13 and
 *   34, taken off once per input group: qn_q8a8_high_fix).
 * Accumulator a (0..3) sums the lanes of rows 3a, 3a+1, 3a+2 (lane i: row
 * 3a + i): word a / 2, shifted by 8 when a is odd.
 *
 * Exact recovery. Lane i of accumulator a sums D = sum w u over the input
 * group. With W = sum w (the row's code sum over the group) and Q = sum q,
 * D = sum c q + 128 W + 128 Q, so the row's true sum is S = D - 128 W - 128 Q,
 * |S| <= 32 * 128 * 127 < 2^19. The accumulator starts at (weight start) -
 * (input start): sum over lanes of (bias_i - 128 W_i) 2^21i minus 128 Q per
 * lane, so it ends at X = sum (S_i + bias_i) 2^21i, all mod 2^64. bias is
 * 2^20 for lanes 0 and 1 (their value S + 2^20 lies in 0 .. 2^21: no borrow
 * into the next lane, read by a mask) and 0 for lane 2 (read signed by one
 * arithmetic shift: X < 2^63 in magnitude). Borrows while summing do not
 * matter: every step is a ring operation mod 2^64 and only X is read.
 */
#ifndef QWEN3_BPF_NUMERICS_Q8A8_H
#define QWEN3_BPF_NUMERICS_Q8A8_H

#include "layout.h"

/* The weights' share of an accumulator's start value: sum over its lanes of
 * (bias_i - 128 W_i) 2^21i, W_i = lane i's code sum (w = c + 128) over the half. */
QN_INLINE qn_u64 qn_q8a8_weight_start(qn_s64 w0, qn_s64 w1, qn_s64 w2) {
  qn_u64 l0 = (qn_u64)(QN_Q8A8_LANE_BIAS - QN_A8_BIAS * w0);
  qn_u64 l1 = (qn_u64)(QN_Q8A8_LANE_BIAS - QN_A8_BIAS * w1);
  qn_u64 l2 = (qn_u64)(-QN_A8_BIAS * w2);
  return l0 + (l1 << QN_Q8A8_LANE_BITS) + (l2 << (2 * QN_Q8A8_LANE_BITS));
}

/* The input's share, subtracted from every accumulator: 128 Q in each lane,
 * Q = sum q of the input group. numerics_q4a8.h's quantizer gives corr = 8 Q. */
QN_INLINE qn_u64 qn_q8a8_input_start(qn_s64 corr) {
  qn_s64 q_sum = corr / QN_Q4_CODE_BIAS; /* exact */
  return (qn_u64)(QN_A8_BIAS * q_sum) * QN_Q8A8_LANE_ONES;
}

/* An odd (high) accumulator's final value X. The kernel adds (V >> 8) u
 * unmasked, so the low rows' codes of lanes 1 and 2 (bits 21 and 42 of V)
 * land at bits 13 and 34: the high accumulator ends 2^13 (P >> 21) above X,
 * where P = sum (V & CODES) u = D0 + 2^21 D1 + 2^42 D2 is what its even
 * partner gathered from its start value (each D < 2^21, so P >> 21 = D1 +
 * 2^21 D2 exactly). hi: the high sum; lo_start, lo_end: the partner's start
 * and final values; all mod 2^64. */
QN_INLINE qn_u64 qn_q8a8_high_fix(qn_u64 hi, qn_u64 lo_start, qn_u64 lo_end) {
  return hi - (((lo_end - lo_start) >> QN_Q8A8_LANE_BITS) << (QN_Q8A8_LANE_BITS - QN_Q8A8_HIGH_SHIFT));
}

/* Row (3a + i)'s true sum S from accumulator a's final value X. */
QN_INLINE qn_s64 qn_q8a8_lane0(qn_u64 x) { return (qn_s64)(x & QN_Q8A8_LANE_MASK) - QN_Q8A8_LANE_BIAS; }
QN_INLINE qn_s64 qn_q8a8_lane1(qn_u64 x) {
  return (qn_s64)((x >> QN_Q8A8_LANE_BITS) & QN_Q8A8_LANE_MASK) - QN_Q8A8_LANE_BIAS;
}
QN_INLINE qn_s64 qn_q8a8_lane2(qn_u64 x) { return (qn_s64)x >> (2 * QN_Q8A8_LANE_BITS); }

/* A row's share of one weight group from its sums over the group's two input
 * groups: ((S0 xs0 + S1 xs1) >> 16) * scale, in the units of the q8 kernel's
 * sum (code x input) * scale. One rounding per weight group (q4a8 rounds per
 * input group: one shift per row saved). |S| <= 520,192 and xs < 2^28
 * (numerics_q4a8.h), so the sum is below 2^48, the shifted sum below 2^32 and
 * its product with a scale below 2^31 below 2^63. */
QN_INLINE qn_s64 qn_q8a8_share(qn_s64 s0, qn_s64 xs0, qn_s64 s1, qn_s64 xs1, qn_s64 scale) {
  return ((s0 * xs0 + s1 * xs1) >> QN_A8_SCALE_FRAC) * scale;
}

#endif
