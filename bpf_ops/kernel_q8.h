/* The q8 dot-product kernel: one block of 8 rows (layout.h) against one
 * input, 2 products per 64-bit multiply. Shared by the forward programs
 * (ops_weights.h) and the low-bit kernel probe (tools/bench/lowbit_probe).
 * The includer provides the BPF integer types (u8..s64) and QN_WQ (the
 * weight address space: empty for maps, __arena for the arena path).
 */
#ifndef QWEN3_BPF_KERNEL_Q8_H
#define QWEN3_BPF_KERNEL_Q8_H

#include "layout.h"
/* q8, one block of 8 rows against one input (decode, and each position of
 * a prefill pass). Column k of a group is one u64 V whose byte j is row j's
 * code + 128 (layout.h); T_j = (V >> 8j) & 0x000000FF000000FF holds rows j
 * and j+4 in two 32-bit lanes, so T_j * x makes two products with one
 * multiply: 20 instructions per column for 8 products (q8_group_asm; the
 * two-row kernel it replaced took 9 per column for 2). Each lane sums 64
 * terms (code + 128) * x with |x| <= 2^QN_Q8_ACT_BITS, which can exceed 32
 * bits, so the sums are taken mod 2^64 and recovered exactly with the
 * group's input sum X (xsum, from mm_gsum_cb): row j's true sum S_j =
 * sum code * x has |S_j| <= 127 * 64 * 2^18 < 2^31, so S_j = (s32)(lane -
 * 128 X) mod 2^32, and once the low lane is known exactly the high one
 * follows. S_j then meets row j's group scale: the same integer as the C++
 * model's one product at a time (tests/bpf/fixed_model.h: dot). */
#define QN_Q8_LANES 0x000000FF000000FFULL

struct qn_dot8 {
  s64 y[QN_Q8_BLOCK_ROWS];
};

/* Lane pair (rows j, j + 4) of one group: t = sum (L + H * 2^32) * x mod 2^64. */
static __always_inline void q8_lanes(u64 t, s64 bias, s64 *lo, s64 *hi) {
  s64 a = (s64)(s32)((u32)t - (u32)bias);
  u64 rest = t - (u64)(a + bias); /* a + bias is the low lane exactly: rest = H * 2^32 mod 2^64 */
  *lo = a;
  *hi = (s64)(s32)((u32)(rest >> 32) - (u32)bias);
}

/* One column of a group: V (8 rows) at pv + ov, x at px + ox, into the four
 * lane pairs. BPF ALU ops overwrite their destination, so each lane pair
 * costs a copy, a shift (not for rows 0/4), an and, a multiply and an add:
 * 2 loads + 18 = 20 instructions per 8 products. Written in asm because
 * clang, given exactly BPF's 10 registers for it, spills and rematerializes
 * the mask inside the loop (~27 instructions per column). */
#define QN_Q8_ASM_COL(ov, ox)                          \
  "%[v] = *(u64 *)(%[pv] + " ov ")\n\t"               \
  "%[x] = *(s32 *)(%[px] + " ox ")\n\t"               \
  "%[u] = %[v]\n\t"                                    \
  "%[u] &= %[m]\n\t"                                   \
  "%[u] *= %[x]\n\t"                                   \
  "%[t0] += %[u]\n\t"                                  \
  "%[v] >>= 8\n\t"                                     \
  "%[u] = %[v]\n\t"                                    \
  "%[u] &= %[m]\n\t"                                   \
  "%[u] *= %[x]\n\t"                                   \
  "%[t1] += %[u]\n\t"                                  \
  "%[v] >>= 8\n\t"                                     \
  "%[u] = %[v]\n\t"                                    \
  "%[u] &= %[m]\n\t"                                   \
  "%[u] *= %[x]\n\t"                                   \
  "%[t2] += %[u]\n\t"                                  \
  "%[v] >>= 8\n\t"                                     \
  "%[v] &= %[m]\n\t"                                   \
  "%[v] *= %[x]\n\t"                                   \
  "%[t3] += %[v]\n\t"

/* A whole group (64 columns, constant offsets: no pointer or counter
 * updates inside). t0..t3: the lane-pair sums mod 2^64. */
_Static_assert(QN_GROUP == 64 && QN_Q8_BLOCK_ROWS == 8,
               "q8_group_asm's offsets are those of 64 columns of one u64 (8 rows' codes) each");
static __always_inline void q8_group_asm(const QN_WQ u64 *pv, const s32 *px, u64 *s0, u64 *s1, u64 *s2,
                                         u64 *s3) {
  u64 t0, t1, t2, t3, v, x, u, m;
  asm volatile("%[m] = 0xff000000ff ll\n\t"
               "%[t0] = 0\n\t"
               "%[t1] = 0\n\t"
               "%[t2] = 0\n\t"
               "%[t3] = 0\n\t"
  QN_Q8_ASM_COL("0", "0")
  QN_Q8_ASM_COL("8", "4")
  QN_Q8_ASM_COL("16", "8")
  QN_Q8_ASM_COL("24", "12")
  QN_Q8_ASM_COL("32", "16")
  QN_Q8_ASM_COL("40", "20")
  QN_Q8_ASM_COL("48", "24")
  QN_Q8_ASM_COL("56", "28")
  QN_Q8_ASM_COL("64", "32")
  QN_Q8_ASM_COL("72", "36")
  QN_Q8_ASM_COL("80", "40")
  QN_Q8_ASM_COL("88", "44")
  QN_Q8_ASM_COL("96", "48")
  QN_Q8_ASM_COL("104", "52")
  QN_Q8_ASM_COL("112", "56")
  QN_Q8_ASM_COL("120", "60")
  QN_Q8_ASM_COL("128", "64")
  QN_Q8_ASM_COL("136", "68")
  QN_Q8_ASM_COL("144", "72")
  QN_Q8_ASM_COL("152", "76")
  QN_Q8_ASM_COL("160", "80")
  QN_Q8_ASM_COL("168", "84")
  QN_Q8_ASM_COL("176", "88")
  QN_Q8_ASM_COL("184", "92")
  QN_Q8_ASM_COL("192", "96")
  QN_Q8_ASM_COL("200", "100")
  QN_Q8_ASM_COL("208", "104")
  QN_Q8_ASM_COL("216", "108")
  QN_Q8_ASM_COL("224", "112")
  QN_Q8_ASM_COL("232", "116")
  QN_Q8_ASM_COL("240", "120")
  QN_Q8_ASM_COL("248", "124")
  QN_Q8_ASM_COL("256", "128")
  QN_Q8_ASM_COL("264", "132")
  QN_Q8_ASM_COL("272", "136")
  QN_Q8_ASM_COL("280", "140")
  QN_Q8_ASM_COL("288", "144")
  QN_Q8_ASM_COL("296", "148")
  QN_Q8_ASM_COL("304", "152")
  QN_Q8_ASM_COL("312", "156")
  QN_Q8_ASM_COL("320", "160")
  QN_Q8_ASM_COL("328", "164")
  QN_Q8_ASM_COL("336", "168")
  QN_Q8_ASM_COL("344", "172")
  QN_Q8_ASM_COL("352", "176")
  QN_Q8_ASM_COL("360", "180")
  QN_Q8_ASM_COL("368", "184")
  QN_Q8_ASM_COL("376", "188")
  QN_Q8_ASM_COL("384", "192")
  QN_Q8_ASM_COL("392", "196")
  QN_Q8_ASM_COL("400", "200")
  QN_Q8_ASM_COL("408", "204")
  QN_Q8_ASM_COL("416", "208")
  QN_Q8_ASM_COL("424", "212")
  QN_Q8_ASM_COL("432", "216")
  QN_Q8_ASM_COL("440", "220")
  QN_Q8_ASM_COL("448", "224")
  QN_Q8_ASM_COL("456", "228")
  QN_Q8_ASM_COL("464", "232")
  QN_Q8_ASM_COL("472", "236")
  QN_Q8_ASM_COL("480", "240")
  QN_Q8_ASM_COL("488", "244")
  QN_Q8_ASM_COL("496", "248")
  QN_Q8_ASM_COL("504", "252")
               : [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [v] "=&r"(v), [x] "=&r"(x),
                 [u] "=&r"(u), [m] "=&r"(m)
               : [pv] "r"((const u64 *)pv), [px] "r"(px) /* arena: the cast makes it a kernel address */
               : "memory");
  *s0 = t0;
  *s1 = t1;
  *s2 = t2;
  *s3 = t3;
}

/* The lane-pair sums t0..t3 of group g (q8_group_asm) into the 8 row sums
 * (out: the worker's map scratch). */
static __always_inline void dot8_q8_lanes(const QN_WQ u8 *blk, const s32 *xsum, u32 g, u64 t0, u64 t1, u64 t2,
                                          u64 t3, struct qn_dot8 *out) {
  const QN_WQ s32 *sc = (const QN_WQ s32 *)(blk + qn_q8_bscale_off(g, 0));
  s64 bias = (s64)xsum[g] * QN_Q8_CODE_BIAS;
  s64 lo, hi;
  q8_lanes(t0, bias, &lo, &hi);
  out->y[0] += lo * sc[0];
  out->y[4] += hi * sc[4];
  q8_lanes(t1, bias, &lo, &hi);
  out->y[1] += lo * sc[1];
  out->y[5] += hi * sc[5];
  q8_lanes(t2, bias, &lo, &hi);
  out->y[2] += lo * sc[2];
  out->y[6] += hi * sc[6];
  q8_lanes(t3, bias, &lo, &hi);
  out->y[3] += lo * sc[3];
  out->y[7] += hi * sc[7];
}

#endif
