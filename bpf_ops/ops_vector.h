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
  s64 r;
  s32 t, sh, s, sh2;
};

static __always_inline s32 *xq_row(u32 thread, u32 c) {
  s32 *b = buf_lookup(&xq_buf, thread);
  if (!b || c >= QN_PMAX) return 0;
  return b + qn_xq_row_off(IN_PAD, c);
}

static __always_inline s32 *xq_shift_slot(u32 thread, u32 c) {
  s32 *b = buf_lookup(&xq_buf, thread);
  if (!b || c >= QN_PMAX) return 0;
  return b + qn_xq_shift_off(IN_PAD, c);
}

static long prep_copy_cb(u64 i, void *ctx) {
  struct prep_state *st = ctx;
  u32 e = (u32)i * 8;
  s32 *dst = xq_row(st->thread, st->c);
  u32 p = st->p;
  QN_BARRIER(p);
  if (!dst || e > IN_PAD - 8 || p >= QN_PMAX) return qn_fail(st->thread, __LINE__);
  const s32 *src = 0;
  if (st->op == QN_OP_O) {
    s32 *b = buf_lookup(&attn_buf, 0);
    if (!b || e > QD_PAD - 8) return qn_fail(st->thread, __LINE__);
    src = b + p * QD_PAD + e;
  } else if (st->op == QN_OP_DOWN) {
    s32 *b = buf_lookup(&mlp_buf, 0);
    if (!b || e > INTER_PAD - 8) return qn_fail(st->thread, __LINE__);
    src = b + p * INTER_PAD + e;
  } else {
    s32 *b = buf_lookup(&resid_buf, 0);
    if (!b || e > HID_PAD - 8) return qn_fail(st->thread, __LINE__);
    src = b + p * HID_PAD + e;
  }
  struct qn_acc *acc = acc_of(st->thread);
  if (!acc) return qn_fail(st->thread, __LINE__);
  s64 mx = (s64)acc->max_abs;
#pragma unroll
  for (int k = 0; k < 8; k++) {
    s32 v = src[k];
    dst[e + k] = v;
    mx = qn_max64(mx, (s64)qn_abs64(v));
  }
  acc->max_abs = (u64)mx;
  return 0;
}

static long prep_ss_cb(u64 i, void *ctx) {
  struct prep_state *st = ctx;
  u32 e = (u32)i * 8;
  s32 *x = xq_row(st->thread, st->c);
  struct qn_acc *acc = acc_of(st->thread);
  if (!x || !acc || e > IN_PAD - 8) return qn_fail(st->thread, __LINE__);
  u64 ss = 0;
#pragma unroll
  for (int k = 0; k < 8; k++) {
    s64 v = x[e + k] >> st->t;
    ss += (u64)(v * v);
  }
  acc->ss += ss;
  return 0;
}

/* Pass 1 of the fused norm: the largest |(x / rms) * w| (Q32) of the vector. */
static long prep_norm_max_cb(u64 i, void *ctx) {
  struct prep_state *st = ctx;
  u32 e = (u32)i * 8;
  s32 *x = xq_row(st->thread, st->c);
  s32 *w = buf_lookup(&norms_buf, 0);
  u32 wo = st->norm_off + e;
  struct qn_acc *acc = acc_of(st->thread);
  if (!x || !w || !acc || e > IN_PAD - 8 || wo > SHAPE.norms_len - 8) return qn_fail(st->thread, __LINE__);
  s64 mx = (s64)acc->max_abs;
#pragma unroll
  for (int k = 0; k < 8; k++) mx = qn_max64(mx, (s64)qn_abs64(qn_rms_apply_wide(x[e + k], st->r, st->sh, w[wo + k])));
  acc->max_abs = (u64)mx;
  return 0;
}

/* Pass 2: the same values requantized straight to the matmul input. */
static long prep_norm_quant_cb(u64 i, void *ctx) {
  struct prep_state *st = ctx;
  u32 e = (u32)i * 8;
  s32 *x = xq_row(st->thread, st->c);
  s32 *w = buf_lookup(&norms_buf, 0);
  u32 wo = st->norm_off + e;
  if (!x || !w || e > IN_PAD - 8 || wo > SHAPE.norms_len - 8) return qn_fail(st->thread, __LINE__);
#pragma unroll
  for (int k = 0; k < 8; k++)
    x[e + k] = (s32)qn_round_shift(qn_rms_apply_wide(x[e + k], st->r, st->sh, w[wo + k]), st->sh2);
  return 0;
}

static long prep_quant_cb(u64 i, void *ctx) {
  struct prep_state *st = ctx;
  u32 e = (u32)i * 8;
  s32 *x = xq_row(st->thread, st->c);
  if (!x || e > IN_PAD - 8) return qn_fail(st->thread, __LINE__);
#pragma unroll
  for (int k = 0; k < 8; k++) x[e + k] = (s32)qn_round_shift(x[e + k], st->s);
  return 0;
}

/* Prepares xq[thread][c] from position p of the op's source; returns 0 or an error line. */
static __always_inline u32 prep_input(struct prep_state *st, int with_norm) {
  u32 chunks = st->n_pad / 8;
  struct qn_acc *acc = acc_of(st->thread);
  if (!acc) return __LINE__;
  acc->max_abs = 0;
  acc->ss = 0;
  bpf_loop(chunks, prep_copy_cb, st, 0);
  if (qn_err(st->thread)) return qn_err(st->thread);
  acc = acc_of(st->thread);
  if (!acc) return __LINE__;
  if (with_norm) {
    st->t = qn_rms_reduce_shift(acc->max_abs);
    bpf_loop(chunks, prep_ss_cb, st, 0);
    acc = acc_of(st->thread);
    if (!acc) return __LINE__;
    int sh = 0;
    st->r = qn_rms_factor(acc->ss, st->n_true, st->t, SHAPE.eps_q32, &sh);
    st->sh = sh;
    acc->max_abs = 0;
    bpf_loop(chunks, prep_norm_max_cb, st, 0);
    if (qn_err(st->thread)) return qn_err(st->thread);
    acc = acc_of(st->thread);
    if (!acc) return __LINE__;
    st->sh2 = qn_input_shift(acc->max_abs, st->act_bits);
    st->s = st->sh2 - 16; /* the input is Q32 before this shift */
    bpf_loop(chunks, prep_norm_quant_cb, st, 0);
  } else {
    st->s = qn_input_shift(acc->max_abs, st->act_bits);
    bpf_loop(chunks, prep_quant_cb, st, 0);
  }
  s32 *slot = xq_shift_slot(st->thread, st->c);
  if (!slot) return __LINE__;
  *slot = st->s;
  return qn_err(st->thread);
}

#endif
