/* Weight units and the dot-product kernels (q24: two rows; q8: a block of
 * eight), for either weight path: `map` (entries of a mmapable array map) or
 * `arena` (BPF arena). Stored layout: layout.h (a q24 unit is a row of groups
 * of 64 int32; a q8 unit is a block of 8 rows, column-interleaved).
 */
#ifndef QWEN3_BPF_OPS_WEIGHTS_H
#define QWEN3_BPF_OPS_WEIGHTS_H

#include "maps.h"

#ifdef QN_WEIGHTS_ARENA
/* Arena pointers need no bounds: the JIT adds the arena base to a 32-bit offset. */
static __always_inline const QN_WQ u8 *weight_row(const struct qn_matrix *m, u32 r) {
  u64 off = m->arena_off + (u64)r * m->row_bytes; /* r: the unit (a q24 row, a q8 block) */
  /* Naming the arena map binds it to the program (required for arena access). */
  asm volatile("" ::"r"(&weights_arena));
  return (const QN_WQ u8 *)off;
}
#else
/* The row's place inside its entry is checked against the largest row, which
 * gives the verifier a bound for every constant column offset that follows. */
static __always_inline const u8 *weight_row(const struct qn_matrix *m, u32 r) {
  u32 rpe = m->rows_per_entry; /* r: the unit (a q24 row, a q8 block) */
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

/* q24: two rows against one input (also for each position of a prefill
 * pass). Every input element is loaded once for both rows.
 * Sums are exact int64, |acc| < 2^62 by the per-matrix act_bits bound. */
struct qn_dot2 {
  s64 a, b;
};

/* q24: plain int64 products, two accumulators. One asm block per group of
 * 64 columns (constant offsets: no pointer updates inside): 3 loads, 2
 * multiplies and 2 adds per column of the two rows. clang's loop spilled
 * and reloaded registers around them (~10 instructions per column). */
#define QN_Q24_ASM_COL(o)                  \
  "%[x] = *(s32 *)(%[px] + " o ")\n\t" \
  "%[w] = *(s32 *)(%[pa] + " o ")\n\t" \
  "%[w] *= %[x]\n\t"                     \
  "%[a] += %[w]\n\t"                     \
  "%[w] = *(s32 *)(%[pb] + " o ")\n\t" \
  "%[w] *= %[x]\n\t"                     \
  "%[b] += %[w]\n\t"
_Static_assert(QN_GROUP == 64 && QN_Q24_GROUP_BYTES == 256, "q24_group_asm's offsets are those of 64 int32 columns");

static __always_inline void q24_group_asm(const QN_WQ s32 *pa, const QN_WQ s32 *pb, const s32 *px, s64 *acc_a,
                                          s64 *acc_b) {
  s64 a = *acc_a, b = *acc_b, w, x;
  asm volatile(
      QN_Q24_ASM_COL("0")
      QN_Q24_ASM_COL("4")
      QN_Q24_ASM_COL("8")
      QN_Q24_ASM_COL("12")
      QN_Q24_ASM_COL("16")
      QN_Q24_ASM_COL("20")
      QN_Q24_ASM_COL("24")
      QN_Q24_ASM_COL("28")
      QN_Q24_ASM_COL("32")
      QN_Q24_ASM_COL("36")
      QN_Q24_ASM_COL("40")
      QN_Q24_ASM_COL("44")
      QN_Q24_ASM_COL("48")
      QN_Q24_ASM_COL("52")
      QN_Q24_ASM_COL("56")
      QN_Q24_ASM_COL("60")
      QN_Q24_ASM_COL("64")
      QN_Q24_ASM_COL("68")
      QN_Q24_ASM_COL("72")
      QN_Q24_ASM_COL("76")
      QN_Q24_ASM_COL("80")
      QN_Q24_ASM_COL("84")
      QN_Q24_ASM_COL("88")
      QN_Q24_ASM_COL("92")
      QN_Q24_ASM_COL("96")
      QN_Q24_ASM_COL("100")
      QN_Q24_ASM_COL("104")
      QN_Q24_ASM_COL("108")
      QN_Q24_ASM_COL("112")
      QN_Q24_ASM_COL("116")
      QN_Q24_ASM_COL("120")
      QN_Q24_ASM_COL("124")
      QN_Q24_ASM_COL("128")
      QN_Q24_ASM_COL("132")
      QN_Q24_ASM_COL("136")
      QN_Q24_ASM_COL("140")
      QN_Q24_ASM_COL("144")
      QN_Q24_ASM_COL("148")
      QN_Q24_ASM_COL("152")
      QN_Q24_ASM_COL("156")
      QN_Q24_ASM_COL("160")
      QN_Q24_ASM_COL("164")
      QN_Q24_ASM_COL("168")
      QN_Q24_ASM_COL("172")
      QN_Q24_ASM_COL("176")
      QN_Q24_ASM_COL("180")
      QN_Q24_ASM_COL("184")
      QN_Q24_ASM_COL("188")
      QN_Q24_ASM_COL("192")
      QN_Q24_ASM_COL("196")
      QN_Q24_ASM_COL("200")
      QN_Q24_ASM_COL("204")
      QN_Q24_ASM_COL("208")
      QN_Q24_ASM_COL("212")
      QN_Q24_ASM_COL("216")
      QN_Q24_ASM_COL("220")
      QN_Q24_ASM_COL("224")
      QN_Q24_ASM_COL("228")
      QN_Q24_ASM_COL("232")
      QN_Q24_ASM_COL("236")
      QN_Q24_ASM_COL("240")
      QN_Q24_ASM_COL("244")
      QN_Q24_ASM_COL("248")
      QN_Q24_ASM_COL("252")
      : [a] "+r"(a), [b] "+r"(b), [w] "=&r"(w), [x] "=&r"(x)
      : [pa] "r"((const s32 *)pa), [pb] "r"((const s32 *)pb), [px] "r"(px) /* arena: the cast makes it a kernel address */
      : "memory");
  *acc_a = a;
  *acc_b = b;
}

/* Rows of more than QN_Q24_INLINE_GROUPS groups run one group per bpf_loop
 * iteration, so the verifier checks the kernel once, not once per group:
 * walked group by group, the 8B shape's 192-group down_proj took the kernel
 * driver's qn_drive_arm_mm past 1M instructions. Narrower rows keep the
 * inline loop: the call per group cost 4-7% of q24's CPU time, and grouping
 * 2 or 4 groups per call measured slower still (qwen3-bpf-kbench). */
#define QN_Q24_INLINE_GROUPS 32
struct q24_group_ctx {
  const QN_WQ s32 *pa, *pb;
  const s32 *px;
  s64 a, b;
};

static long q24_group_cb(u64 i, void *ctx) {
  struct q24_group_ctx *gc = ctx;
  u32 g = (u32)i;
  QN_BARRIER(g);
  if (g >= IN_PAD / QN_GROUP) return 1; /* bounds the input and both rows (max_row_bytes) */
  u32 o = g * QN_GROUP;
  q24_group_asm(gc->pa + o, gc->pb + o, gc->px + o, &gc->a, &gc->b);
  return 0;
}

/* `groups` is a load-time constant (from .rodata): the verifier walks one of
 * the two paths, and the inline loop's single path. */
static __always_inline void dot2_q24(const QN_WQ u8 *ra, const QN_WQ u8 *rb, const s32 *x, u32 groups,
                                     struct qn_dot2 *out) {
  struct q24_group_ctx gc = {(const QN_WQ s32 *)ra, (const QN_WQ s32 *)rb, x, 0, 0};
  if (groups > QN_Q24_INLINE_GROUPS) {
    bpf_loop(groups, q24_group_cb, &gc, 0);
  } else {
    for (u32 g = 0; g < groups; g++) {
      q24_group_asm(gc.pa, gc.pb, gc.px, &gc.a, &gc.b);
      gc.pa += QN_GROUP;
      gc.pb += QN_GROUP;
      gc.px += QN_GROUP;
    }
  }
  out->a = gc.a;
  out->b = gc.b;
}

#include "kernel_q8.h"
#include "kernel_q4a8.h"
#include "numerics_q8a8.h"

static __always_inline int weight_frac(const struct qn_matrix *m) {
  return (int)qn_min64(m->wfrac, 31);
}

/* The embedding's row format: q24 in a q24 model; tied, the vocabulary's
 * (q8a8), else q8. A load-time constant, so the verifier prunes the other
 * formats' code. */
static __always_inline u32 embed_format(void) {
  return qn_op_format(SHAPE.precision, SHAPE.tied ? QN_OP_VOCAB : 0);
}

/* Row r's unit and its row within the unit (q8: block r / 8, row r % 8;
 * q8a8: block r / 12) of the embedding. */
static __always_inline const QN_WQ u8 *weight_unit_of(const struct qn_matrix *m, u32 r, u32 *j) {
  u32 ur = qn_unit_rows(embed_format());
  *j = r % ur;
  return weight_row(m, r / ur);
}

/* Column (g, k) of row j of a unit (embedding lookup) as Q16. */
static __always_inline s32 weight_q16(const QN_WQ u8 *row, u32 j, u32 g, int k, int wfrac, u32 fmt) {
  if (fmt == QN_PREC_Q8A8) {
    j &= 15;
    if (j >= QN_Q8A8_BLOCK_ROWS) return 0;
    s64 scale = *(const QN_WQ s32 *)(row + qn_q8a8_bscale_off(g, j));
    u64 v = *(const QN_WQ u64 *)(row + qn_q8a8_bword_off(g, k / QN_A8_GROUP, k % QN_A8_GROUP, qn_q8a8_word(j)));
    s64 q = (s64)((v >> qn_q8a8_code_shift(j)) & 0xFF) - QN_Q8_CODE_BIAS;
    return qn_sat32(qn_round_shift(q * scale, wfrac - QN_ACT_FRAC));
  }
  if (fmt == QN_PREC_Q8) {
    j &= QN_Q8_BLOCK_ROWS - 1;
    s64 scale = *(const QN_WQ s32 *)(row + qn_q8_bscale_off(g, j));
    s64 q = (s64)((const QN_WQ u8 *)(row + qn_q8_bcol_off(g, k)))[j] - QN_Q8_CODE_BIAS;
    return qn_sat32(qn_round_shift(q * scale, wfrac - QN_ACT_FRAC));
  }
  const QN_WQ s32 *wg = (const QN_WQ s32 *)(row + qn_group_off(QN_PREC_Q24, g));
  return qn_sat32(qn_round_shift(wg[k], wfrac - QN_ACT_FRAC));
}

/* q8, q8a8: the outlier tail (int64 [QN_OUT_COLS]) of row j of a block, or
 * 0 past the largest block (the bounds the verifier needs, on the registers
 * the offset is computed from). */
static __always_inline const QN_WQ s64 *weight_q8_tail(const QN_WQ u8 *blk, u32 groups, u32 j, u32 fmt) {
  QN_BARRIER(groups);
  if (groups > SHAPE.max_groups) return 0;
  if (fmt == QN_PREC_Q8A8) {
    QN_BARRIER(j);
    if (j >= QN_Q8A8_BLOCK_ROWS) return 0;
    return (const QN_WQ s64 *)(blk + qn_q8a8_btail_off(groups, j));
  }
  return (const QN_WQ s64 *)(blk + qn_q8_btail_off(groups, j & (QN_Q8_BLOCK_ROWS - 1)));
}

#endif
