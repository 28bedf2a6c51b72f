/* The matmul family's q4 step (precision = q4's QKV, o and gate/up): each
 * input vector quantized to 8 bits once per pass (mm_a8_cb), then a block of
 * 16 rows (8 gate/up pairs) against one position, 16 products per column of
 * 4 multiplies (kernel_q4a8.h). A part of ops_matmul.h, which includes it
 * where mm_state, mm_groups and mm_block_finish are declared.
 */
#ifndef QWEN3_BPF_OPS_MATMUL_Q4_H
#define QWEN3_BPF_OPS_MATMUL_Q4_H

struct a8_state {
  u32 thread, halves; /* QN_A8_GROUP groups per input */
};

/* Iteration i = (compact position, group of QN_A8_GROUP inputs). */
static long mm_a8_cb(u64 i, void *ctx) {
  struct a8_state *st = ctx;
  u32 halves = st->halves;
  if (halves == 0 || halves > IN_PAD / QN_A8_GROUP) return qn_fail(st->thread, __LINE__);
  u32 c = (u32)i / halves;
  u32 h = (u32)i - c * halves;
  u8 *b = buf_lookup(&xq_buf, st->thread);
  QN_BARRIER(h);
  if (!b || c >= QN_PMAX || h >= IN_PAD / QN_A8_GROUP) return qn_fail(st->thread, __LINE__);
  const s32 *x = (const s32 *)b + qn_xq_row_off(IN_PAD, c) + h * QN_A8_GROUP;
  u8 *xu = b + qn_xq_a8_code_off(IN_PAD, c) + h * QN_A8_GROUP;
  s64 *xs = (s64 *)(b + qn_xq_a8_scale_off(IN_PAD, c)) + 2 * h;
  qn_a8_quantize_group(x, xu, &xs[0], &xs[1]);
  return 0;
}

struct q4_group_ctx {
  const QN_WQ u8 *w;
  const u8 *xu;   /* the position's 8-bit codes */
  const s64 *xs;  /* its (scale, correction) pairs */
  struct qn_dot16 *d;
};

/* One group of QN_Q4_GROUP columns of a block (bpf_loop: verified once). */
static long mm_q4_group_cb(u64 i, void *ctx) {
  struct q4_group_ctx *gc = ctx;
  u32 gq = (u32)i;
  QN_BARRIER(gq);
  if (gq >= IN_PAD / QN_Q4_GROUP) return 1; /* bounds xu, xs and the block (max_row_bytes) */
  dot16_q4a8_group(gc->w, gq, gc->xu + gq * QN_Q4_GROUP, gc->xs[2 * gq], gc->xs[2 * gq + 1], gc->d);
  return 0;
}

static __always_inline u32 mm_q4_block_pos(const struct mm_state *st, u32 r, u32 c, int cls) {
  u32 op = st->op;
  QN_BARRIER(op);
  const QN_WQ u8 *w = mm_block_unit(st, op, r, cls, QN_Q4_BLOCK_ROWS);
  u8 *b = buf_lookup(&xq_buf, st->thread);
  if (!w || !b || c >= QN_PMAX) return __LINE__;
  /* the 16 sums share the q8 block sums' map scratch (xq_ysum) */
  struct qn_dot16 *d = (struct qn_dot16 *)((s32 *)b + qn_xq_ysum_off(IN_PAD));
#pragma unroll
  for (int j = 0; j < QN_Q4_BLOCK_ROWS; j++) d->y[j] = 0;
  struct q4_group_ctx gc = {w, b + qn_xq_a8_code_off(IN_PAD, c), (const s64 *)(b + qn_xq_a8_scale_off(IN_PAD, c)), d};
  bpf_loop(2 * mm_groups(op, cls), mm_q4_group_cb, &gc, 0);
  return mm_block_finish(st, r, c, w, d->y, cls, QN_PREC_Q4);
}

#endif
