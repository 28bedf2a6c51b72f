/* Matmul input preparation, done by every worker into its private scratch:
 * copy the source vector, optionally RMSNorm it (hidden-size norms are cheap,
 * so each worker recomputes them instead of another kernel call), then
 * requantize it to the matrix's act_bits (block floating point, one shift per
 * vector). Vectors are walked in chunks of 8 elements by bpf_loop.
 */
#ifndef QWEN3_BPF_OPS_VECTOR_H
#define QWEN3_BPF_OPS_VECTOR_H

#include "maps.h"

struct prep_state {
  u32 op, thread, c, p;
  u32 n_pad, n_true, norm_off, act_bits;
  u64 max_abs, ss;
  s64 r;
  s32 t, sh, s;
  u32 err;
};

static __always_inline s32 *xq_row(u32 thread, u32 c) {
  s32 *b = buf_lookup(&xq_buf, thread);
  if (!b || c >= QN_PMAX) return 0;
  return b + c * IN_PAD;
}

static __always_inline s32 *xq_shift_slot(u32 thread, u32 c) {
  s32 *b = buf_lookup(&xq_buf, thread);
  if (!b || c >= QN_PMAX) return 0;
  return b + QN_PMAX * IN_PAD + c;
}

static __always_inline void track_max(struct prep_state *st, s32 v) {
  u64 a = qn_abs64(v);
  if (a > st->max_abs) st->max_abs = a;
}

static long prep_copy_cb(u64 i, void *ctx) {
  struct prep_state *st = ctx;
  u32 e = (u32)i * 8;
  s32 *dst = xq_row(st->thread, st->c);
  if (!dst || e > IN_PAD - 8 || st->p >= QN_PMAX) { st->err = __LINE__; return 1; }
  const s32 *src = 0;
  if (st->op == QN_OP_O) {
    s32 *b = buf_lookup(&attn_buf, 0);
    if (!b || e > QD_PAD - 8) { st->err = __LINE__; return 1; }
    src = b + st->p * QD_PAD + e;
  } else if (st->op == QN_OP_DOWN) {
    s32 *b = buf_lookup(&mlp_buf, 0);
    if (!b || e > INTER_PAD - 8) { st->err = __LINE__; return 1; }
    src = b + st->p * INTER_PAD + e;
  } else {
    s32 *b = buf_lookup(&resid_buf, 0);
    if (!b || e > HID_PAD - 8) { st->err = __LINE__; return 1; }
    src = b + st->p * HID_PAD + e;
  }
#pragma unroll
  for (int k = 0; k < 8; k++) {
    s32 v = src[k];
    dst[e + k] = v;
    track_max(st, v);
  }
  return 0;
}

static long prep_ss_cb(u64 i, void *ctx) {
  struct prep_state *st = ctx;
  u32 e = (u32)i * 8;
  s32 *x = xq_row(st->thread, st->c);
  if (!x || e > IN_PAD - 8) { st->err = __LINE__; return 1; }
  u64 ss = 0;
#pragma unroll
  for (int k = 0; k < 8; k++) {
    s64 v = x[e + k] >> st->t;
    ss += (u64)(v * v);
  }
  st->ss += ss;
  return 0;
}

static long prep_norm_cb(u64 i, void *ctx) {
  struct prep_state *st = ctx;
  u32 e = (u32)i * 8;
  s32 *x = xq_row(st->thread, st->c);
  s32 *w = buf_lookup(&norms_buf, 0);
  u32 wo = st->norm_off + e;
  if (!x || !w || e > IN_PAD - 8 || wo > SHAPE.norms_len - 8) { st->err = __LINE__; return 1; }
#pragma unroll
  for (int k = 0; k < 8; k++) {
    s32 y = qn_rms_apply(x[e + k], st->r, st->sh, w[wo + k]);
    x[e + k] = y;
    track_max(st, y);
  }
  return 0;
}

static long prep_quant_cb(u64 i, void *ctx) {
  struct prep_state *st = ctx;
  u32 e = (u32)i * 8;
  s32 *x = xq_row(st->thread, st->c);
  if (!x || e > IN_PAD - 8) { st->err = __LINE__; return 1; }
#pragma unroll
  for (int k = 0; k < 8; k++) x[e + k] = (s32)qn_round_shift(x[e + k], st->s);
  return 0;
}

/* Prepares xq[thread][c] from position p of the op's source; returns 0 or an error line. */
static __always_inline u32 prep_input(struct prep_state *st, int with_norm) {
  u32 chunks = st->n_pad / 8;
  st->max_abs = 0;
  st->ss = 0;
  bpf_loop(chunks, prep_copy_cb, st, 0);
  if (st->err) return st->err;
  if (with_norm) {
    st->t = qn_rms_reduce_shift(st->max_abs);
    bpf_loop(chunks, prep_ss_cb, st, 0);
    int sh = 0;
    st->r = qn_rms_factor(st->ss, st->n_true, st->t, SHAPE.eps_q32, &sh);
    st->sh = sh;
    st->max_abs = 0;
    bpf_loop(chunks, prep_norm_cb, st, 0);
    if (st->err) return st->err;
  }
  st->s = qn_input_shift(st->max_abs, st->act_bits);
  bpf_loop(chunks, prep_quant_cb, st, 0);
  s32 *slot = xq_shift_slot(st->thread, st->c);
  if (!slot) return __LINE__;
  *slot = st->s;
  return st->err;
}

#endif
