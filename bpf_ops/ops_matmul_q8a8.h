/* The matmul family's q8a8 step (the vocabulary of q8 models): the
 * input quantized to 8 bits once per pass (mm_a8_cb, as for q4), then a
 * block of 12 rows against one position, 12 products per column of 4
 * multiplies in 21-bit lanes (kernel_q8a8.h). A part of ops_matmul.h, which
 * includes it after ops_matmul_q4.h (mm_a8_cb, mm_block_finish).
 */
#ifndef QWEN3_BPF_OPS_MATMUL_Q8A8_H
#define QWEN3_BPF_OPS_MATMUL_Q8A8_H

#include "kernel_q8a8.h"

struct q8a8_group_ctx {
  const QN_WQ u8 *w;
  const u8 *xu;   /* the position's 8-bit codes */
  const s64 *xs;  /* its (scale, correction) pairs, one per QN_A8_GROUP inputs */
  struct qn_dot12 *d;
};

/* One group of QN_GROUP columns of a block (bpf_loop: verified once): two
 * input groups, whose start shares come from their corrections. */
static long mm_q8a8_group_cb(u64 i, void *ctx) {
  struct q8a8_group_ctx *gc = ctx;
  u32 g = (u32)i;
  QN_BARRIER(g);
  if (g >= IN_PAD / QN_GROUP) return 1; /* bounds xu, xs and the block (max_row_bytes) */
  const s64 *xp = gc->xs + 4 * g;
  s64 xs[2] = {xp[0], xp[2]};
  u64 start[2] = {qn_q8a8_input_start(xp[1]), qn_q8a8_input_start(xp[3])};
  dot12_q8a8_group(gc->w, g, gc->xu + g * QN_GROUP, xs, start, gc->d);
  return 0;
}

static __always_inline u32 mm_q8a8_block_pos(const struct mm_state *st, u32 r, u32 c, int cls) {
  u32 op = st->op;
  QN_BARRIER(op);
  const QN_WQ u8 *w = mm_block_unit(st, op, r, cls, QN_Q8A8_BLOCK_ROWS);
  u8 *b = buf_lookup(&xq_buf, st->thread);
  if (!w || !b || c >= QN_PMAX) return __LINE__;
  /* the 12 sums share the q8 block sums' map scratch (xq_ysum) */
  struct qn_dot12 *d = (struct qn_dot12 *)((s32 *)b + qn_xq_ysum_off(IN_PAD));
#pragma unroll
  for (int j = 0; j < QN_Q8A8_BLOCK_ROWS; j++) d->y[j] = 0;
  struct q8a8_group_ctx gc = {w, b + qn_xq_a8_code_off(IN_PAD, c), (const s64 *)(b + qn_xq_a8_scale_off(IN_PAD, c)),
                              d};
  bpf_loop(mm_groups(op, cls), mm_q8a8_group_cb, &gc, 0);
  return mm_block_finish(st, r, c, w, d->y, cls, QN_PREC_Q8A8);
}

#endif
