/* The q8a8 dot-product kernel (the vocabulary of q8 models; the lowbit probe runs it too): one block
 * of 12 rows of q8 weights against 8-bit inputs in 21-bit lanes, 3 products
 * per 64-bit multiply (numerics_q8a8.h has the layout and why it is exact).
 *
 * Per column: one input byte u and two u64 words of 6 rows each; a word V
 * gives (V & CODES) * u and (V >> 8) * u, three products each, so 3 loads +
 * 14 ALU = 17 BPF instructions per 12 products (q8: 20 per 8, q4a8: 20 per
 * 16). V >> 8 keeps the low rows' codes of lanes 1 and 2 at bits 13 and 34,
 * so the high accumulator gathers 2^13 (D1 + 2^21 D2) on top of its own
 * lanes, D1 and D2 being the low accumulator's lane sums: that term is taken
 * off once per input group (qn_q8a8_high_fix), not masked off per column. The
 * lanes take the 32 columns of an input group without spreading; per input
 * group and row only the lane read and its scaling remain. The includer
 * provides the BPF integer types (u8..s64) and QN_WQ.
 */
#ifndef QWEN3_BPF_KERNEL_Q8A8_H
#define QWEN3_BPF_KERNEL_Q8A8_H

#include "numerics_q8a8.h"

/* One word at offset ov into accumulators ta (its rows 0-2) and tb (rows
 * 3-5, with the low rows' codes of lanes 1 and 2 still in: qn_q8a8_high_fix).
 * BPF ALU ops overwrite their destination, hence the copy. */
#define QN_Q8A8_ASM_WORD(ov, ta, tb)    \
  "%[v] = *(u64 *)(%[pv] + " ov ")\n\t" \
  "%[u] = %[v]\n\t"                     \
  "%[u] &= %[m]\n\t"                    \
  "%[u] *= %[x]\n\t"                    \
  "%[" ta "] += %[u]\n\t"               \
  "%[v] >>= 8\n\t"                      \
  "%[v] *= %[x]\n\t"                    \
  "%[" tb "] += %[v]\n\t"

/* Column k: word 0 at ova, word 1 at ovb, the input byte at ox. */
#define QN_Q8A8_ASM_COL(ova, ovb, ox)  \
  "%[x] = *(u8 *)(%[px] + " ox ")\n\t" \
  QN_Q8A8_ASM_WORD(ova, "t0", "t1")    \
  QN_Q8A8_ASM_WORD(ovb, "t2", "t3")

/* One half of a weight group (one input group of 32 columns): ph is the
 * half (its 4 start values, then its columns), pu the input bytes, start the
 * input's share of the start values. t0..t3: the accumulators' final values
 * X (numerics_q8a8.h; t1 and t3 before qn_q8a8_high_fix). Written in asm
 * for the reason kernel_q8.h gives: 10 registers exactly (4 accumulators,
 * word, input, copy, mask, 2 pointers). */
_Static_assert(QN_A8_GROUP == 32 && QN_Q8A8_BSTARTS_BYTES == 32 && QN_Q8A8_BCOL_BYTES == 16,
               "q8a8_half_asm's offsets are those of 4 start values, then 32 columns of two u64 each");
static __always_inline void q8a8_half_asm(const QN_WQ u8 *ph, const u8 *pu, u64 start, u64 *s0, u64 *s1,
                                          u64 *s2, u64 *s3) {
  u64 t0, t1, t2, t3, v, x = start, u, m;
  asm volatile("%[m] = 0x3fc001fe000ff ll\n\t"
               "%[t0] = *(u64 *)(%[pv] + 0)\n\t"
               "%[t0] -= %[x]\n\t"
               "%[t1] = *(u64 *)(%[pv] + 8)\n\t"
               "%[t1] -= %[x]\n\t"
               "%[t2] = *(u64 *)(%[pv] + 16)\n\t"
               "%[t2] -= %[x]\n\t"
               "%[t3] = *(u64 *)(%[pv] + 24)\n\t"
               "%[t3] -= %[x]\n\t"
  QN_Q8A8_ASM_COL("32", "40", "0")
  QN_Q8A8_ASM_COL("48", "56", "1")
  QN_Q8A8_ASM_COL("64", "72", "2")
  QN_Q8A8_ASM_COL("80", "88", "3")
  QN_Q8A8_ASM_COL("96", "104", "4")
  QN_Q8A8_ASM_COL("112", "120", "5")
  QN_Q8A8_ASM_COL("128", "136", "6")
  QN_Q8A8_ASM_COL("144", "152", "7")
  QN_Q8A8_ASM_COL("160", "168", "8")
  QN_Q8A8_ASM_COL("176", "184", "9")
  QN_Q8A8_ASM_COL("192", "200", "10")
  QN_Q8A8_ASM_COL("208", "216", "11")
  QN_Q8A8_ASM_COL("224", "232", "12")
  QN_Q8A8_ASM_COL("240", "248", "13")
  QN_Q8A8_ASM_COL("256", "264", "14")
  QN_Q8A8_ASM_COL("272", "280", "15")
  QN_Q8A8_ASM_COL("288", "296", "16")
  QN_Q8A8_ASM_COL("304", "312", "17")
  QN_Q8A8_ASM_COL("320", "328", "18")
  QN_Q8A8_ASM_COL("336", "344", "19")
  QN_Q8A8_ASM_COL("352", "360", "20")
  QN_Q8A8_ASM_COL("368", "376", "21")
  QN_Q8A8_ASM_COL("384", "392", "22")
  QN_Q8A8_ASM_COL("400", "408", "23")
  QN_Q8A8_ASM_COL("416", "424", "24")
  QN_Q8A8_ASM_COL("432", "440", "25")
  QN_Q8A8_ASM_COL("448", "456", "26")
  QN_Q8A8_ASM_COL("464", "472", "27")
  QN_Q8A8_ASM_COL("480", "488", "28")
  QN_Q8A8_ASM_COL("496", "504", "29")
  QN_Q8A8_ASM_COL("512", "520", "30")
  QN_Q8A8_ASM_COL("528", "536", "31")
               : [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [v] "=&r"(v), [x] "+r"(x),
                 [u] "=&r"(u), [m] "=&r"(m)
               : [pv] "r"((const u8 *)ph), [px] "r"(pu) /* arena: the cast makes it a kernel address */
               : "memory");
  *s0 = t0;
  *s1 = t1;
  *s2 = t2;
  *s3 = t3;
}
_Static_assert(QN_Q8A8_CODES == 0x3fc001fe000ffULL, "q8a8_half_asm's mask is QN_Q8A8_CODES");

/* Accumulator a's stored start value (its weights' share) in half h of a
 * weight group (grp: the group's first byte; layout.h's offsets within group 0). */
static __always_inline u64 q8a8_stored_start(const QN_WQ u8 *grp, u32 h, u32 a) {
  return *(const QN_WQ u64 *)(grp + qn_q8a8_bstart_off(0, h, a));
}

struct qn_dot12 {
  s64 y[QN_Q8A8_BLOCK_ROWS];
};

/* Accumulator a's three rows from both halves of a weight group (x0, x1:
 * its final values): each row's two sums meet the row's scale once. */
static __always_inline void q8a8_add_rows(u64 x0, u64 x1, s64 xs0, s64 xs1, const QN_WQ s32 *sc, s64 *y) {
  /* one accumulator pair at a time: left alone, clang interleaves all four
   * and spills (~50 more instructions per weight group) */
  asm volatile("" : "+r"(x0), "+r"(x1) : : "memory");
  y[0] += qn_q8a8_share(qn_q8a8_lane0(x0), xs0, qn_q8a8_lane0(x1), xs1, sc[0]);
  y[1] += qn_q8a8_share(qn_q8a8_lane1(x0), xs0, qn_q8a8_lane1(x1), xs1, sc[1]);
  y[2] += qn_q8a8_share(qn_q8a8_lane2(x0), xs0, qn_q8a8_lane2(x1), xs1, sc[2]);
}

/* Weight group g (QN_GROUP columns, two input groups) of a block (blk: the
 * block's bytes) against the input bytes xu (its 64), the input groups'
 * scales xs[2] and start shares start[2], added into out. The first half's
 * accumulators wait (4 spills) until the second half's are done, so each row
 * is read and scaled in one pass. */
_Static_assert(QN_GROUP == 2 * QN_A8_GROUP && QN_Q8A8_BLOCK_ROWS == 3 * QN_Q8A8_ACCS,
               "a weight group is two input groups; an accumulator holds 3 rows");
static __always_inline void dot12_q8a8_group(const QN_WQ u8 *blk, u32 g, const u8 *xu, const s64 *xs,
                                             const u64 *start, struct qn_dot12 *out) {
  u64 a0, a1, a2, a3, b0, b1, b2, b3;
  q8a8_half_asm(blk + qn_q8a8_bhalf_off(g, 0), xu, start[0], &a0, &a1, &a2, &a3);
  q8a8_half_asm(blk + qn_q8a8_bhalf_off(g, 1), xu + QN_A8_GROUP, start[1], &b0, &b1, &b2, &b3);
  const QN_WQ u8 *grp = blk + qn_q8a8_bscale_off(g, 0);
  const QN_WQ s32 *sc = (const QN_WQ s32 *)grp;
  s64 xs0 = xs[0], xs1 = xs[1];
  /* the low accumulators' start values are read again from the block rather
   * than kept across the asm: BPF's 512-byte stack over three frames has no room */
  a1 = qn_q8a8_high_fix(a1, q8a8_stored_start(grp, 0, 0) - start[0], a0);
  b1 = qn_q8a8_high_fix(b1, q8a8_stored_start(grp, 1, 0) - start[1], b0);
  q8a8_add_rows(a0, b0, xs0, xs1, &sc[0], &out->y[0]);
  q8a8_add_rows(a1, b1, xs0, xs1, &sc[3], &out->y[3]);
  a3 = qn_q8a8_high_fix(a3, q8a8_stored_start(grp, 0, 2) - start[0], a2);
  b3 = qn_q8a8_high_fix(b3, q8a8_stored_start(grp, 1, 2) - start[1], b2);
  q8a8_add_rows(a2, b2, xs0, xs1, &sc[6], &out->y[6]);
  q8a8_add_rows(a3, b3, xs0, xs1, &sc[9], &out->y[9]);
}

#endif
