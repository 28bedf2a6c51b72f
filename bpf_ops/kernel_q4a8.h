/* The q4a8 dot-product kernel: one block of 16 rows of 4-bit codes
 * (layout.h) against 8-bit inputs, 4 products per 64-bit multiply.
 *
 * Column k of a group is one u64 V whose nibble j is row j's code c (0..15);
 * T_s = (V >> 4s) & 0x000F000F000F000F holds rows s, s+4, s+8, s+12 in four
 * 16-bit lanes, so T_s * u (u = q + 128, 0..255) makes four products with one
 * multiply. All terms are non-negative, so lanes never borrow: a lane holds
 * 16 columns (16 * 15 * 255 < 2^16) before it is spread into 32-bit lanes.
 * 20 BPF instructions per column for 16 products (q8: 20 for 8).
 * The includer provides the BPF integer types (u8..s64) and QN_WQ.
 */
#ifndef QWEN3_BPF_KERNEL_Q4A8_H
#define QWEN3_BPF_KERNEL_Q4A8_H

#include "numerics_q4a8.h"

#define QN_Q4_LANES32 0x0000FFFF0000FFFFULL

/* One column: 2 loads + 18 ALU instructions (BPF ALU ops overwrite their
 * destination, hence the copies). */
#define QN_Q4A8_ASM_COL(ov, ox)  \
  "%[v] = *(u64 *)(%[pv] + " ov ")\n\t" \
  "%[x] = *(u8 *)(%[px] + " ox ")\n\t"  \
  "%[u] = %[v]\n\t"                     \
  "%[u] &= %[m]\n\t"                    \
  "%[u] *= %[x]\n\t"                    \
  "%[t0] += %[u]\n\t"                   \
  "%[v] >>= 4\n\t"                      \
  "%[u] = %[v]\n\t"                     \
  "%[u] &= %[m]\n\t"                    \
  "%[u] *= %[x]\n\t"                    \
  "%[t1] += %[u]\n\t"                   \
  "%[v] >>= 4\n\t"                      \
  "%[u] = %[v]\n\t"                     \
  "%[u] &= %[m]\n\t"                    \
  "%[u] *= %[x]\n\t"                    \
  "%[t2] += %[u]\n\t"                   \
  "%[v] >>= 4\n\t"                      \
  "%[v] &= %[m]\n\t"                    \
  "%[v] *= %[x]\n\t"                    \
  "%[t3] += %[v]\n\t"

/* 16 columns (half a group) at pv / px: the four 16-bit lane sums t0..t3,
 * spread into 32-bit lanes: lo[s] (rows s, s+8) and hi[s] (rows s+4, s+12). */
static __always_inline void q4a8_half(const QN_WQ u64 *pv, const u8 *px, u64 lo[4], u64 hi[4]) {
  u64 t0, t1, t2, t3, v, x, u, m;
  asm volatile("%[m] = 0x000F000F000F000F ll\n\t"
               "%[t0] = 0\n\t"
               "%[t1] = 0\n\t"
               "%[t2] = 0\n\t"
               "%[t3] = 0\n\t"
  QN_Q4A8_ASM_COL("0", "0")
  QN_Q4A8_ASM_COL("8", "1")
  QN_Q4A8_ASM_COL("16", "2")
  QN_Q4A8_ASM_COL("24", "3")
  QN_Q4A8_ASM_COL("32", "4")
  QN_Q4A8_ASM_COL("40", "5")
  QN_Q4A8_ASM_COL("48", "6")
  QN_Q4A8_ASM_COL("56", "7")
  QN_Q4A8_ASM_COL("64", "8")
  QN_Q4A8_ASM_COL("72", "9")
  QN_Q4A8_ASM_COL("80", "10")
  QN_Q4A8_ASM_COL("88", "11")
  QN_Q4A8_ASM_COL("96", "12")
  QN_Q4A8_ASM_COL("104", "13")
  QN_Q4A8_ASM_COL("112", "14")
  QN_Q4A8_ASM_COL("120", "15")               : [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [v] "=&r"(v), [x] "=&r"(x),
                 [u] "=&r"(u), [m] "=&r"(m)
               : [pv] "r"((const u64 *)pv), [px] "r"(px) /* arena: the cast makes it a kernel address */
               : "memory");
  lo[0] += t0 & QN_Q4_LANES32;
  hi[0] += (t0 >> 16) & QN_Q4_LANES32;
  lo[1] += t1 & QN_Q4_LANES32;
  hi[1] += (t1 >> 16) & QN_Q4_LANES32;
  lo[2] += t2 & QN_Q4_LANES32;
  hi[2] += (t2 >> 16) & QN_Q4_LANES32;
  lo[3] += t3 & QN_Q4_LANES32;
  hi[3] += (t3 >> 16) & QN_Q4_LANES32;
}

struct qn_dot16 {
  s64 y[QN_Q4_BLOCK_ROWS];
};

/* One group g of a block (blk: the block's bytes) against the group's codes
 * xu (its 32 bytes), scale xs and correction corr, added into out. */
static __always_inline void dot16_q4a8_group(const QN_WQ u8 *blk, u32 g, const u8 *xu, s64 xs, s64 corr,
                                             struct qn_dot16 *out) {
  u64 lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
  const QN_WQ u64 *pv = (const QN_WQ u64 *)(blk + qn_q4_bcol_off(g, 0));
  q4a8_half(pv, xu, lo, hi);
  q4a8_half(pv + QN_Q4_GROUP / 2, xu + QN_Q4_GROUP / 2, lo, hi);
  const QN_WQ s32 *sc = (const QN_WQ s32 *)(blk + qn_q4_bscale_off(g, 0));
  const QN_WQ qn_u16 *cs = (const QN_WQ qn_u16 *)(blk + qn_q4_bcsum_off(g, 0));
#pragma unroll
  for (int s = 0; s < 4; s++) {
    out->y[s] += qn_q4a8_share((s64)(u32)lo[s], cs[s], corr, xs, sc[s]);
    out->y[s + 8] += qn_q4a8_share((s64)(lo[s] >> 32), cs[s + 8], corr, xs, sc[s + 8]);
    out->y[s + 4] += qn_q4a8_share((s64)(u32)hi[s], cs[s + 4], corr, xs, sc[s + 4]);
    out->y[s + 12] += qn_q4a8_share((s64)(hi[s] >> 32), cs[s + 12], corr, xs, sc[s + 12]);
  }
}

#endif
