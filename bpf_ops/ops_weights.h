/* Weight rows and the two dot-product kernels (q24, q8), for either weight
 * path: `map` (entries of a mmapable array map) or `arena` (BPF arena).
 * Row format: layout.h (q24 groups of 64 int32; q8 groups of an int32
 * scale and 64 int8, then the int64 outlier tail).
 */
#ifndef QWEN3_BPF_OPS_WEIGHTS_H
#define QWEN3_BPF_OPS_WEIGHTS_H

#include "maps.h"

#ifdef QN_WEIGHTS_ARENA
/* Arena pointers need no bounds: the JIT adds the arena base to a 32-bit offset. */
static __always_inline const QN_WQ u8 *weight_row(const struct qn_matrix *m, u32 r) {
  u64 off = m->arena_off + (u64)r * m->row_bytes;
  /* Naming the arena map binds it to the program (required for arena access). */
  asm volatile("" ::"r"(&weights_arena));
  return (const QN_WQ u8 *)off;
}
#else
/* The row's place inside its entry is checked against the largest row, which
 * gives the verifier a bound for every constant column offset that follows. */
static __always_inline const u8 *weight_row(const struct qn_matrix *m, u32 r) {
  u32 rpe = m->rows_per_entry;
  if (rpe == 0) return 0;
  u32 slot = r + m->row_skip;
  u32 key = m->entry0 + slot / rpe;
  u64 off = (u64)(slot % rpe) * m->row_bytes;
  const u8 *base = bpf_map_lookup_elem(&weights_map, &key);
  if (!base) return 0;
  QN_BARRIER(off);
  if (off > QN_WENTRY_BYTES - SHAPE.max_row_bytes) return 0;
  return base + off;
}
#endif

/* Keeps clang from hoisting the loads of later columns (it would run out of
 * BPF's 10 registers and spill them to the stack): the loads of a block of
 * four columns come after this point. Emits no instruction. */
#define QN_KERNEL_ORDER(a, b, c) asm volatile("" : "+r"(a), "+r"(b), "+r"(c))

/* Two rows against one input: the decode kernel (q24 also for each position
 * of a prefill pass). Every input element is loaded once for both rows.
 * `groups` must be a load-time constant (from .rodata): the verifier then
 * walks one path through the loop, not one per possible exit. Sums are exact
 * int64, |acc| < 2^62 by the per-matrix act_bits bound. */
struct qn_dot2 {
  s64 a, b;
};

/* q24: plain int64 products, two accumulators. */
static __always_inline void dot2_q24(const QN_WQ u8 *ra, const QN_WQ u8 *rb, const s32 *x, u32 groups,
                                     struct qn_dot2 *out) {
  s64 acc_a = 0, acc_b = 0;
  const QN_WQ s32 *pa = (const QN_WQ s32 *)ra, *pb = (const QN_WQ s32 *)rb;
  const s32 *px = x;
  for (u32 g = 0; g < groups * (QN_GROUP / 4); g++) {
    QN_KERNEL_ORDER(pa, pb, px);
#pragma unroll
    for (int k = 0; k < 4; k++) {
      s64 xv = px[k];
      acc_a += (s64)pa[k] * xv;
      acc_b += (s64)pb[k] * xv;
    }
    pa += 4;
    pb += 4;
    px += 4;
  }
  out->a = acc_a;
  out->b = acc_b;
}

/* q8: per group an exact sum of int8 * input, times the group's scale; then
 * the matrix's outlier columns, kept exact as int64 after the groups (their
 * int8 slots are zero; `ocol` entries are < IN_PAD).
 * Packed: one 64-bit multiply per column serves both rows,
 * (wa + wb * 2^32) * x = wa*x + (wb*x) * 2^32. With |x| <= 2^QN_Q8_ACT_BITS
 * a group's sum per row stays below 2^31 (64 * 127 * 2^18), so the low 32
 * bits (sign-extended) are row a's group sum exactly and the rest, shifted
 * down, row b's; the whole stays below 2^63. Each group sum then meets its
 * row's scale, so the result is the same integer as one product at a time
 * (tests/bpf/fixed_model.h: dot). */
static __always_inline void dot2_q8(const QN_WQ u8 *ra, const QN_WQ u8 *rb, const s32 *x, u32 groups,
                                    const u32 *ocol, struct qn_dot2 *out) {
  s64 acc_a = 0, acc_b = 0;
  for (u32 g = 0; g < groups; g++) {
    const QN_WQ u8 *ga = ra + g * QN_Q8_GROUP_BYTES;
    const QN_WQ u8 *gb = rb + g * QN_Q8_GROUP_BYTES;
    const QN_WQ s8 *pa = (const QN_WQ s8 *)(ga + QN_Q8_SCALE_BYTES);
    const QN_WQ s8 *pb = (const QN_WQ s8 *)(gb + QN_Q8_SCALE_BYTES);
    const s32 *px = x + g * QN_GROUP;
    s64 t = 0;
    for (int q = 0; q < QN_GROUP / 4; q++) {
      QN_KERNEL_ORDER(pa, pb, px);
#pragma unroll
      for (int k = 0; k < 4; k++) t += ((s64)pa[k] + (s64)pb[k] * (1LL << 32)) * px[k];
      pa += 4;
      pb += 4;
      px += 4;
    }
    s64 lo = (s64)(s32)t;
    s64 hi = (t - lo) >> 32;
    acc_a += lo * *(const QN_WQ s32 *)ga;
    acc_b += hi * *(const QN_WQ s32 *)gb;
  }
  const QN_WQ s64 *oa = (const QN_WQ s64 *)(ra + qn_q8_tail_off(groups));
  const QN_WQ s64 *ob = (const QN_WQ s64 *)(rb + qn_q8_tail_off(groups));
#pragma unroll
  for (int k = 0; k < QN_OUT_COLS; k++) {
    s64 xv = x[ocol[k]];
    acc_a += oa[k] * xv;
    acc_b += ob[k] * xv;
  }
  out->a = acc_a;
  out->b = acc_b;
}

/* q8 prefill: two rows against a pair of positions packed as
 * x0 + x1 * 2^32 (xq_pair_row): wa * X holds row a's group sums for both
 * positions in its two 32-bit lanes (same bound as dot2_q8), so two
 * multiplies serve four products. x0, x1: the plain inputs (outlier
 * columns). out: a0, b0 (position 0), a1, b1 (position 1). */
struct qn_dot4 {
  s64 a0, b0, a1, b1;
};

static __always_inline void dot4_q8(const QN_WQ u8 *ra, const QN_WQ u8 *rb, const s64 *xp, const s32 *x0,
                                    const s32 *x1, u32 groups, const u32 *ocol, struct qn_dot4 *out) {
  s64 a0 = 0, a1 = 0, b0 = 0, b1 = 0;
  for (u32 g = 0; g < groups; g++) {
    const QN_WQ u8 *ga = ra + g * QN_Q8_GROUP_BYTES;
    const QN_WQ u8 *gb = rb + g * QN_Q8_GROUP_BYTES;
    const QN_WQ s8 *pa = (const QN_WQ s8 *)(ga + QN_Q8_SCALE_BYTES);
    const QN_WQ s8 *pb = (const QN_WQ s8 *)(gb + QN_Q8_SCALE_BYTES);
    const s64 *px = xp + g * QN_GROUP;
    s64 ta = 0, tb = 0;
    for (int q = 0; q < QN_GROUP / 4; q++) {
      QN_KERNEL_ORDER(pa, pb, px);
#pragma unroll
      for (int k = 0; k < 4; k++) {
        s64 xv = px[k];
        ta += pa[k] * xv;
        tb += pb[k] * xv;
      }
      pa += 4;
      pb += 4;
      px += 4;
    }
    s64 sa = *(const QN_WQ s32 *)ga, sb = *(const QN_WQ s32 *)gb;
    s64 lo = (s64)(s32)ta;
    a0 += lo * sa;
    a1 += ((ta - lo) >> 32) * sa;
    lo = (s64)(s32)tb;
    b0 += lo * sb;
    b1 += ((tb - lo) >> 32) * sb;
  }
  const QN_WQ s64 *oa = (const QN_WQ s64 *)(ra + qn_q8_tail_off(groups));
  const QN_WQ s64 *ob = (const QN_WQ s64 *)(rb + qn_q8_tail_off(groups));
#pragma unroll
  for (int k = 0; k < QN_OUT_COLS; k++) {
    s64 v0 = x0[ocol[k]], v1 = x1[ocol[k]];
    a0 += oa[k] * v0;
    a1 += oa[k] * v1;
    b0 += ob[k] * v0;
    b1 += ob[k] * v1;
  }
  out->a0 = a0;
  out->b0 = b0;
  out->a1 = a1;
  out->b1 = b1;
}

static __always_inline void weight_dot2(const QN_WQ u8 *ra, const QN_WQ u8 *rb, const s32 *x, u32 groups,
                                        const u32 *ocol, struct qn_dot2 *out) {
  if (SHAPE.precision == QN_PREC_Q8) dot2_q8(ra, rb, x, groups, ocol, out);
  else dot2_q24(ra, rb, x, groups, out);
}

static __always_inline int weight_frac(const struct qn_matrix *m) {
  return (int)qn_min64(m->wfrac, 31);
}

/* Column c of a row (embedding lookup) as Q16. */
static __always_inline s32 weight_q16(const QN_WQ u8 *row, u32 g, int k, int wfrac) {
  if (SHAPE.precision == QN_PREC_Q8) {
    const QN_WQ u8 *gp = row + qn_group_off(QN_PREC_Q8, g);
    s64 scale = *(const QN_WQ s32 *)gp;
    s64 q = ((const QN_WQ s8 *)(gp + QN_Q8_SCALE_BYTES))[k];
    return qn_sat32(qn_round_shift(q * scale, wfrac - QN_ACT_FRAC));
  }
  const QN_WQ s32 *wg = (const QN_WQ s32 *)(row + qn_group_off(QN_PREC_Q24, g));
  return qn_sat32(qn_round_shift(wg[k], wfrac - QN_ACT_FRAC));
}

#endif
