/* The scalar arithmetic of q4 weights x 8-bit activations (layout.h, "q4a8"):
 * compiled as BPF C by the kernels (kernel_q4a8.h, ops_matmul_q4.h) and as
 * C++ by their models (tests/bpf/fixed_model.h, tools/bench/lowbit_probe/
 * q4a8_model.h), so all compute the same integers.
 */
#ifndef QWEN3_BPF_NUMERICS_Q4A8_H
#define QWEN3_BPF_NUMERICS_Q4A8_H

#include "layout.h"

/* A group's reciprocal for the codes: round(127 2^32 / m), m = max|x| > 0
 * (one division per group, not per input). */
QN_INLINE qn_s64 qn_a8_inverse(qn_s64 m) { return ((127LL << 32) + m / 2) / m; }

/* An input's 8-bit code: round(x * 127 / m) as (x inv + 2^31) >> 32 (an
 * arithmetic shift). m inv <= 127 2^32 + m / 2, so |q| <= 127 for |x| <= m. */
QN_INLINE qn_s32 qn_a8_code(qn_s32 x, qn_s64 inv) { return (qn_s32)(((qn_s64)x * inv + (1LL << 31)) >> 32); }

/* The group's scale: round(m 2^16 / 127); m <= 2^QN_Q8_ACT_BITS keeps it < 2^27. */
QN_INLINE qn_s64 qn_a8_scale(qn_s64 m) { return ((m << QN_A8_SCALE_FRAC) + 63) / 127; }

/* One row's share of one group: S = sum (c - 8) q over the group's 32
 * columns (|S| <= 32 * 8 * 127 < 2^15), from the kernel's unsigned lane sum
 * D = sum c (q + 128): S = D - 128 sum c - 8 sum q. The share, in the
 * units of (weight scale) x (input), is ((S xs) >> 16) * scale: |S xs| <
 * 2^42, so the product with a 31-bit scale stays below 2^57. */
QN_INLINE qn_s64 qn_q4a8_share(qn_s64 lane_sum, qn_s64 code_sum, qn_s64 corr, qn_s64 xs, qn_s64 scale) {
  qn_s64 s = lane_sum - code_sum * QN_A8_BIAS - corr;
  return ((s * xs) >> QN_A8_SCALE_FRAC) * scale;
}

/* The input of one group as q4a8 wants it (layout.h): codes + 128 into xu,
 * the scale xs and the correction corr = 8 * sum q. An all-zero group gets
 * codes 128 (q = 0). The kernel (mm_a8_cb) and both C++ models call this. */
QN_INLINE void qn_a8_quantize_group(const qn_s32 *x, qn_u8 *xu, qn_s64 *xs, qn_s64 *corr) {
  qn_s64 m = 0;
#ifndef __cplusplus
#pragma unroll
#endif
  for (int k = 0; k < QN_A8_GROUP; k++) {
    qn_s64 a = x[k] < 0 ? -(qn_s64)x[k] : x[k];
    m = a > m ? a : m;
  }
  qn_s64 inv = m ? qn_a8_inverse(m) : 0, sum = 0;
#ifndef __cplusplus
#pragma unroll
#endif
  for (int k = 0; k < QN_A8_GROUP; k++) {
    qn_s32 q = qn_a8_code(x[k], inv);
    xu[k] = (qn_u8)(q + QN_A8_BIAS);
    sum += q;
  }
  *xs = qn_a8_scale(m);
  *corr = QN_Q4_CODE_BIAS * sum;
}

#endif
