/* The matmul program family: five operations (qn_args.op), all
 * "prepare input -> rows [row_begin, row_end) x positions -> epilogue":
 *   QN_OP_QKV     rmsnorm(resid) @ Wqkv            -> qkv
 *   QN_OP_GATEUP  rmsnorm(resid) @ Wgu (row pairs) -> silu(gate) * up -> mlp
 *   QN_OP_O       attn @ Wo                        -> resid += (residual fused)
 *   QN_OP_DOWN    mlp @ Wdown                      -> resid +=
 *   QN_OP_VOCAB   rmsnorm(resid, final) @ Wlm      -> logits, argmax, top-k
 * compiled into separate programs so each stays within the verifier's budget:
 * qn_matmul (QKV, GATEUP, VOCAB) and qn_matmul_proj (O, DOWN), plus for q8
 * the prefill variants *_pre (since the block layout the same code as the
 * decode programs; user space still picks them by position count). A q24
 * step of the row loop covers two rows (a gate/up pair, or rows r and r+1)
 * so every input load serves both; a q8 step covers a block of 8 rows
 * (4 gate/up pairs), one 64-bit load per column for all 8 and two products
 * per multiply (kernel_q8.h); a q4 step a block of 16 rows against 8-bit
 * inputs, four products per multiply (ops_matmul_q4.h; which op's matrix
 * has which format: qn_op_format). Each step's rows are dotted with every
 * position of the pass while they are hot in L1 (batched prefill).
 */
#ifndef QWEN3_BPF_OPS_MATMUL_H
#define QWEN3_BPF_OPS_MATMUL_H

#include "ops_vector.h"
#include "ops_weights.h"
#include "ops_q8multi.h"

/* The two op classes, each its own program (and for q8 a prefill variant
 * of each), verified separately: one program for all five ops exceeds the
 * verifier's 1M-instruction budget with the two-row kernels. */
#define QN_MM_NORMED 0 /* qn_matmul: QKV, GATEUP, VOCAB; input rmsnorm(resid), HID_PAD columns */
#define QN_MM_PROJ 1   /* qn_matmul_proj: O, DOWN; input attn / mlp, output added to resid */

static __always_inline int mm_op_in_class(u32 op, int cls) {
  if (cls == QN_MM_PROJ) return op == QN_OP_O || op == QN_OP_DOWN;
  return op == QN_OP_QKV || op == QN_OP_GATEUP || op == QN_OP_VOCAB;
}

struct mm_state {
  struct qn_matrix mat;
  u32 op, thread, row_begin, row_end, row_step, ncomp, top_k, norm_off;
  u32 npb; /* multi-position q8 kernel: blocks of QN_Q8_PBLK compact positions */
  s32 wf; /* the weights' fraction bits */
  u8 comp_pos[QN_PMAX]; /* compact index -> position in the pass */
};

static __always_inline struct qn_topk_slot *topk_slot(u32 thread, u32 c) {
  if (thread >= SHAPE.threads || c >= QN_PMAX) return 0;
  return buf_lookup(&topk_buf, thread * QN_PMAX + c);
}

/* Keeps argmax (lowest id among equals) and the k best (sorted by logit,
 * lower id first among equals), whatever order the rows come in: the kernel
 * driver's shares reach a worker's lists out of row order. A global
 * function: the verifier checks it once, not once per exit state of the
 * previous call (a matmul step stores two rows). */
__attribute__((noinline)) int qn_topk_update(struct qn_topk_slot *t, s32 id, s32 v, u32 k) {
  if (!t) return 0;
  if (t->argmax_id < 0 || v > t->argmax_logit || (v == t->argmax_logit && id < t->argmax_id)) {
    t->argmax_id = id;
    t->argmax_logit = v;
  }
  if (k == 0 || k > QN_TOPK_MAX) return 0;
  s32 cnt = t->count;
  if (cnt < 0 || cnt > QN_TOPK_MAX) return 0;
  if ((u32)cnt >= k) {
    struct qn_topk_entry *last = &t->e[(k - 1) & (QN_TOPK_MAX - 1)];
    if (v < last->logit || (v == last->logit && id > last->id)) return 0;
  }
  s32 j = (u32)cnt < k ? cnt : (s32)k - 1;
  for (int it = 0; it < QN_TOPK_MAX; it++) {
    u32 jj = (u32)j;
    QN_BARRIER(jj); /* keep an index the verifier can bound, not a walking pointer */
    if (jj == 0 || jj >= QN_TOPK_MAX) break;
    if (t->e[jj - 1].logit > v || (t->e[jj - 1].logit == v && t->e[jj - 1].id < id)) break;
    t->e[jj] = t->e[jj - 1];
    j = (s32)jj - 1;
  }
  u32 at = (u32)j;
  QN_BARRIER(at);
  if (at >= QN_TOPK_MAX) return 0;
  t->e[at].id = id;
  t->e[at].logit = v;
  if ((u32)cnt < k) t->count = cnt + 1;
  return 0;
}

/* Stores output row r of compact position c (all ops but gate/up). */
static __always_inline u32 mm_store(const struct mm_state *st, u32 op, int cls, u32 r, u32 c, u32 p, s32 y) {
  if (cls == QN_MM_PROJ) {
    s32 *out = buf_lookup(&resid_buf, 0);
    u32 oi = p * HID_PAD + r;
    QN_BARRIER(oi);
    if (!out || r >= HID_PAD || oi >= QN_PMAX * HID_PAD) return __LINE__;
    s32 *o = &out[oi];
    *o = qn_sat32((s64)*o + y);
  } else if (op == QN_OP_QKV) {
    s32 *out = buf_lookup(&qkv_buf, 0);
    u32 oi = p * QKV_PAD + r;
    QN_BARRIER(oi); /* check the final index right before the store */
    if (!out || r >= QKV_PAD || oi >= QN_PMAX * QKV_PAD) return __LINE__;
    out[oi] = y;
  } else if (op == QN_OP_VOCAB) {
    s32 *out = buf_lookup(&logits_buf, 0);
    u32 oi = c * SHAPE.vocab + r;
    QN_BARRIER(oi);
    if (!out || r >= SHAPE.vocab || oi >= QN_PMAX * SHAPE.vocab) return __LINE__;
    out[oi] = y;
    struct qn_topk_slot *t = topk_slot(st->thread, c);
    if (!t) return __LINE__;
    qn_topk_update(t, (s32)r, y, st->top_k);
  } else {
    return __LINE__;
  }
  return 0;
}

/* The outputs of one step for compact position c (at position p): gate/up
 * -> silu(ya) * yb at r; otherwise ya at row ra and yb at row rb (unless rb
 * repeats ra, the odd last row). */
static __always_inline u32 mm_emit(const struct mm_state *st, u32 op, int cls, u32 r, u32 ra, u32 rb, u32 c, u32 p,
                                   s32 ya, s32 yb) {
  if (cls == QN_MM_NORMED && op == QN_OP_GATEUP) {
    s32 *out = buf_lookup(&mlp_buf, 0);
    u32 oi = p * INTER_PAD + r;
    QN_BARRIER(oi);
    if (!out || r >= INTER_PAD || oi >= QN_PMAX * INTER_PAD) return __LINE__;
    out[oi] = qn_silu_mul(ya, yb);
    return 0;
  }
  u32 e = mm_store(st, op, cls, ra, c, p, ya);
  if (e || rb == ra) return e;
  return mm_store(st, op, cls, rb, c, p, yb);
}

/* Step r of the row loop against compact position c: for gate/up the row
 * pair (2r, 2r+1) -> silu(gate) * up at r; otherwise rows r and r+1 (r+1
 * only when below row_end; the kernel then reads row r twice). 0 or an
 * error line. */
static __always_inline u32 mm_rows_pos(const struct mm_state *st, u32 r, u32 c, int cls) {
  /* one register copy of op: each test on it then narrows it for the
   * verifier, which explores the kernel once per op instead of per test */
  u32 op = st->op;
  QN_BARRIER(op);
  s32 *x = xq_row(st->thread, c);
  s32 *shp = xq_shift_slot(st->thread, c);
  if (!x || !shp) return __LINE__;
  int s = *shp;
  int wf = st->wf;
  if (s < -16 || s > wf || wf > 31) return __LINE__;
  u32 p = st->comp_pos[c & (QN_PMAX - 1)];
  if (p >= QN_PMAX) return __LINE__;
  u32 groups = cls == QN_MM_NORMED ? HID_PAD / QN_GROUP : op == QN_OP_O ? QD_PAD / QN_GROUP : INTER_PAD / QN_GROUP;
  /* gate/up: the row pair (2r, 2r+1); otherwise rows r and r+1 */
  u32 ra = r, rb = r + 1 < st->row_end ? r + 1 : r;
  if (cls == QN_MM_NORMED && op == QN_OP_GATEUP) {
    ra = 2 * r;
    rb = 2 * r + 1;
  }
  const QN_WQ u8 *wa = weight_row(&st->mat, ra);
  const QN_WQ u8 *wb = weight_row(&st->mat, rb);
  if (!wa || !wb) return __LINE__;
  struct qn_dot2 d = {};
  dot2_q24(wa, wb, x, groups, &d);
  /* op is read again rather than kept live across the kernel: the verifier
   * can then merge the ops that share an input length and walk the kernel
   * once per length */
  op = st->op;
  QN_BARRIER(op);
  return mm_emit(st, op, cls, r, ra, rb, c, p, qn_matmul_out(d.a, wf, s), qn_matmul_out(d.b, wf, s));
}

/* q8: the group sums of position c's input ([IN_PAD / QN_GROUP] s32, layout.h). */
static __always_inline s32 *xq_gsum_row(u32 thread, u32 c) {
  s32 *b = buf_lookup(&xq_buf, thread);
  if (!b || c >= QN_PMAX) return 0;
  return b + qn_xq_gsum_off(IN_PAD, c);
}

static __always_inline struct qn_dot8 *xq_ysum(u32 thread) {
  s32 *b = buf_lookup(&xq_buf, thread);
  if (!b) return 0;
  return (struct qn_dot8 *)(b + qn_xq_ysum_off(IN_PAD));
}

struct gsum_state {
  u32 thread, groups;
};

/* Iteration i = (compact position, group): the sum of the group's inputs,
 * once per input vector, shared by every block (dot8_q8's correction). */
static long mm_gsum_cb(u64 i, void *ctx) {
  struct gsum_state *st = ctx;
  u32 groups = st->groups;
  if (groups == 0 || groups > IN_PAD / QN_GROUP) return qn_fail(st->thread, __LINE__);
  u32 c = (u32)i / groups;
  u32 g = (u32)i - c * groups;
  s32 *x = xq_row(st->thread, c);
  s32 *xs = xq_gsum_row(st->thread, c);
  QN_BARRIER(g);
  if (!x || !xs || g >= IN_PAD / QN_GROUP) return qn_fail(st->thread, __LINE__);
  const s32 *px = x + g * QN_GROUP;
  s64 sum = 0;
#pragma unroll
  for (int k = 0; k < QN_GROUP; k++) sum += px[k];
  xs[g] = (s32)sum; /* |sum| <= 64 * 2^QN_Q8_ACT_BITS */
  return 0;
}

/* One group of a block (bpf_loop over the groups): the verifier checks the
 * kernel body once per program, not once per group, so its budget no longer
 * grows with the matrix width (the kernel is ~1,300 instructions a group). */
struct q8_group_ctx {
  const QN_WQ u8 *w;
  const s32 *x, *xs;
  struct qn_dot8 *d;
};

static long mm_q8_group_cb(u64 i, void *ctx) {
  struct q8_group_ctx *gc = ctx;
  u32 g = (u32)i;
  QN_BARRIER(g);
  if (g >= IN_PAD / QN_GROUP) return 1; /* bounds x, xs and the block (max_row_bytes) */
  u64 t0, t1, t2, t3;
  q8_group_asm((const QN_WQ u64 *)(gc->w + qn_q8_bcol_off(g, 0)), gc->x + g * QN_GROUP, &t0, &t1, &t2, &t3);
  /* everything else is read after the asm (its memory clobber forces the
   * reloads), so only gc and g are spilled across it: three nested frames
   * share BPF's 512-byte stack */
  dot8_q8_lanes(gc->w, gc->xs, g, t0, t1, t2, t3, gc->d);
  return 0;
}

/* q8 step: the block of rows [r, r + 8) (gate/up: the pairs [r, r + 4),
 * rows 2r .. 2r + 7) against compact position c; rows at or beyond row_end
 * (the padding of the last block, or the next worker's) are not stored.
 * r is a multiple of the block (mm_main checks row_begin). */
/* The block (of br rows: q8 8, q4 16) holding rows r.. (gate/up: pairs r.., rows 2r..). */
static __always_inline const QN_WQ u8 *mm_block_unit(const struct mm_state *st, u32 op, u32 r, int cls, u32 br) {
  int pairs = cls == QN_MM_NORMED && op == QN_OP_GATEUP;
  return weight_row(&st->mat, pairs ? r / (br / 2) : r / br);
}

static __always_inline u32 mm_groups(u32 op, int cls) {
  return cls == QN_MM_NORMED ? HID_PAD / QN_GROUP : op == QN_OP_O ? QD_PAD / QN_GROUP : INTER_PAD / QN_GROUP;
}

static __always_inline u32 mm_block_finish(const struct mm_state *st, u32 r, u32 c, const QN_WQ u8 *w, s64 *y,
                                           int cls, u32 fmt);

static __always_inline u32 mm_block_pos(const struct mm_state *st, u32 r, u32 c, int cls) {
  u32 op = st->op;
  QN_BARRIER(op);
  s32 *x = xq_row(st->thread, c);
  s32 *xs = xq_gsum_row(st->thread, c);
  if (!x || !xs) return __LINE__;
  u32 groups = mm_groups(op, cls);
  const QN_WQ u8 *w = mm_block_unit(st, op, r, cls, QN_Q8_BLOCK_ROWS);
  if (!w) return __LINE__;
  /* the sums live in the worker's map scratch: the callback's stack (with
   * the spills around the kernel's asm) would exceed BPF's 512 bytes */
  struct qn_dot8 *d = xq_ysum(st->thread);
  if (!d) return __LINE__;
#pragma unroll
  for (int j = 0; j < QN_Q8_BLOCK_ROWS; j++) d->y[j] = 0;
  struct q8_group_ctx gc = {w, x, xs, d};
  bpf_loop(groups, mm_q8_group_cb, &gc, 0);
  return mm_block_finish(st, r, c, w, d->y, cls, QN_PREC_Q8);
}

#include "ops_matmul_q4.h"
#include "ops_matmul_q8a8.h"

/* The end of a block of format fmt (q8, q4, q8a8) for compact position c:
 * the outlier columns, then the outputs (y: the block's row sums of that
 * position, one per row of the block). */
static __always_inline u32 mm_block_finish(const struct mm_state *st, u32 r, u32 c, const QN_WQ u8 *w, s64 *y,
                                           int cls, u32 fmt) {
  const u32 br = qn_unit_rows(fmt);
  u32 op = st->op;
  QN_BARRIER(op);
  s32 *x = xq_row(st->thread, c);
  s32 *shp = xq_shift_slot(st->thread, c);
  if (!x || !shp) return __LINE__;
  int s = *shp;
  int wf = st->wf;
  if (s < -16 || s > wf || wf > 31) return __LINE__;
  u32 p = st->comp_pos[c & (QN_PMAX - 1)];
  if (p >= QN_PMAX) return __LINE__;
  u32 groups = mm_groups(op, cls);
  _Static_assert(QN_OUT_COLS == 4, "the outlier columns' inputs are four registers");
  u32 oc0 = st->mat.ocol[0], oc1 = st->mat.ocol[1], oc2 = st->mat.ocol[2], oc3 = st->mat.ocol[3];
  if (oc0 >= IN_PAD || oc1 >= IN_PAD || oc2 >= IN_PAD || oc3 >= IN_PAD) return __LINE__;
  s64 x0 = x[oc0], x1 = x[oc1], x2 = x[oc2], x3 = x[oc3];
  /* row by row, not unrolled: clang hoisted the 16 rows' addresses of an
   * unrolled loop onto the stack, past BPF's 512 bytes over three frames */
  for (u32 j = 0; j < br; j++) {
    u32 jj = j;
    QN_BARRIER(jj);
    const QN_WQ s64 *t = (const QN_WQ s64 *)(w + (fmt == QN_PREC_Q4     ? qn_q4_btail_off(groups, jj)
                                                  : fmt == QN_PREC_Q8A8 ? qn_q8a8_btail_off(groups, jj)
                                                                        : qn_q8_btail_off(groups, jj)));
    y[jj & (QN_Q4_BLOCK_ROWS - 1)] += t[0] * x0 + t[1] * x1 + t[2] * x2 + t[3] * x3;
  }
  op = st->op; /* read again: see mm_rows_pos */
  QN_BARRIER(op);
  u32 end = st->row_end, e = 0;
  if (cls == QN_MM_NORMED && op == QN_OP_GATEUP) {
    for (u32 i = 0; i < br / 2; i++) {
      if (r + i >= end) break;
      u32 jj = 2 * i;
      QN_BARRIER(jj);
      if (jj >= br - 1) break;
      e = mm_emit(st, op, cls, r + i, 2 * (r + i), 2 * (r + i) + 1, c, p, qn_matmul_out(y[jj], wf, s),
                  qn_matmul_out(y[jj + 1], wf, s));
      if (e) return e;
    }
    return 0;
  }
  for (u32 j = 0; j < br; j++) {
    if (r + j >= end) break;
    u32 jj = j;
    QN_BARRIER(jj);
    if (jj >= br) break;
    e = mm_store(st, op, cls, r + j, c, p, qn_matmul_out(y[jj], wf, s));
    if (e) return e;
  }
  return 0;
}

#include "ops_matmul_q8m.h"

/* q8: the block kernel (mm_block_pos), also for prefill; q4: the q4a8
 * block kernel (its own callbacks: sharing a frame with the others' would
 * pass BPF's 512 bytes of stack over the three nested frames); q24: two rows. */
static __always_inline long mm_row_step(u64 i, void *ctx, int cls, u32 kfmt) {
  struct mm_state *st = ctx;
  /* Callbacks never write the caller's stack: the verifier then sees one
   * state per loop and verifies each callback body once. */
  u32 n = st->ncomp;
  if (n == 0 || n > QN_PMAX) return qn_fail(st->thread, __LINE__);
  /* only the ops of this callback's format: the verifier then explores each
   * op in one format, not both (the kernel driver's programs stay within
   * its budget) */
  u32 fop = st->op;
  u32 ofmt = qn_op_format(SHAPE.precision, fop);
  if ((ofmt == QN_PREC_Q4) != (kfmt == QN_PREC_Q4) || (ofmt == QN_PREC_Q8A8) != (kfmt == QN_PREC_Q8A8))
    return qn_fail(st->thread, __LINE__);
  u32 step = n == 1 ? (u32)i : (u32)i / n;
  u32 c = (u32)i - step * n;
  u32 r = st->row_begin + step * st->row_step;
  u32 e = kfmt == QN_PREC_Q4     ? mm_q4_block_pos(st, r, c, cls)
          : kfmt == QN_PREC_Q8A8 && SHAPE.precision != QN_PREC_Q24 ? mm_q8a8_block_pos(st, r, c, cls)
          : SHAPE.precision != QN_PREC_Q24 ? mm_block_pos(st, r, c, cls)
                                           : mm_rows_pos(st, r, c, cls);
  return e ? qn_fail(st->thread, e) : 0;
}
/* kfmt 0: the q8 block or q24 row kernels */
static long mm_row_cb_normed(u64 i, void *ctx) { return mm_row_step(i, ctx, QN_MM_NORMED, 0); }
static long mm_row_cb_proj(u64 i, void *ctx) { return mm_row_step(i, ctx, QN_MM_PROJ, 0); }
static long mm_q4_cb_normed(u64 i, void *ctx) { return mm_row_step(i, ctx, QN_MM_NORMED, QN_PREC_Q4); }
static long mm_q4_cb_proj(u64 i, void *ctx) { return mm_row_step(i, ctx, QN_MM_PROJ, QN_PREC_Q4); }
/* the vocabulary (normed class) */
static long mm_q8a8_cb_normed(u64 i, void *ctx) { return mm_row_step(i, ctx, QN_MM_NORMED, QN_PREC_Q8A8); }

static __always_inline long mm_prep(u64 i, void *ctx, int cls) {
  struct mm_state *st = ctx;
  struct prep_state ps = {};
  ps.op = st->op;
  ps.thread = st->thread;
  ps.c = (u32)i;
  ps.p = st->comp_pos[i & (QN_PMAX - 1)];
  ps.act_bits = st->mat.act_bits;
  ps.norm_off = st->norm_off;
  int with_norm = cls == QN_MM_NORMED;
  if (with_norm) {
    ps.n_pad = HID_PAD;
    ps.n_true = SHAPE.hidden;
  } else {
    ps.n_pad = st->op == QN_OP_O ? QD_PAD : INTER_PAD;
  }
  u32 e = prep_input(&ps, with_norm);
  return e ? qn_fail(st->thread, e) : 0;
}
static long mm_prep_cb_normed(u64 i, void *ctx) { return mm_prep(i, ctx, QN_MM_NORMED); }
static long mm_prep_cb_proj(u64 i, void *ctx) { return mm_prep(i, ctx, QN_MM_PROJ); }

/* A format's callback address (q4, q8a8), loaded inside its branch: clang
 * would otherwise load it before the branch and select, and in models
 * without that format the verifier then sees a live reference to a callback
 * it never visited and removed as dead ("verifier bug: No program to jit"). */
#define mm_branch_cb(cb)      \
  ({                        \
    void *cb_ = (void *)cb; \
    QN_BARRIER(cb_);        \
    cb_;                    \
  })

/* Which ops a program runs (the kernel driver splits them by format,
 * ops_drive.h); outside q4 models every op is "not q4". */
#define QN_MM_ANY 0
#define QN_MM_ONLY_Q4 1
#define QN_MM_NO_Q4 2    /* nor q8a8: the kernel driver's families split the formats */
#define QN_MM_ONLY_Q8A8 3

/* Whether op is outside the program's ops (QN_MM_*), tested on the register mm_run
 * keeps, so the verifier explores only these ops' formats. The vocabulary
 * (q8a8) is told by its op, bounded first so that "not VOCAB" is one range, not two states. */
static __always_inline int mm_op_outside(u32 op, int ops) {
  int vocab8 = SHAPE.precision != QN_PREC_Q24;
  if (vocab8 && op > QN_OP_VOCAB) return 1;
  u32 fmt = qn_op_format(SHAPE.precision, op);
  switch (ops) { /* a constant per program: one case is left */
    case QN_MM_ONLY_Q4: return fmt != QN_PREC_Q4;
    case QN_MM_NO_Q4: return fmt == QN_PREC_Q4 || (vocab8 && op == QN_OP_VOCAB);
    case QN_MM_ONLY_Q8A8: return !vocab8 || op != QN_OP_VOCAB;
    default: return 0;
  }
}

/* multi: the multi-position q8 kernel (the _pre programs, q8, >= 2 positions) */
static __always_inline int mm_run(struct qn_args *a, int cls, int multi, int ops) {
  struct mm_state st = {};
  st.mat = a->mat;
  u32 op = a->op;
  if (mm_op_outside(op, ops)) {
    a->status = __LINE__;
    return a->status;
  }
  st.op = op;
  st.thread = a->thread;
  st.row_begin = a->row_begin;
  st.top_k = a->top_k;
  st.norm_off = a->norm_off;
  u32 npos = a->npos, mask = a->pos_mask, row_end = a->row_end;
  st.row_end = row_end;
  /* q24: one step is a gate/up row pair, otherwise two rows; q8: a block
   * of 8 rows (4 gate/up pairs); q4: a block of 16 rows (8 pairs). The
   * q4 kernel serves every position of a pass one at a time, and so does
   * the q8 one outside the multi-position programs. */
  u32 fmt = qn_op_format(SHAPE.precision, st.op);
  /* each family's program keeps only its formats' code (ops is a constant
   * per program; q8a8 also tested on the load-time precision): the driver's
   * mm program would otherwise verify the vocabulary's q8a8 kernel too */
  /* a q4 model's normed ops are q4 or q8a8: no q8 state there (the verifier
   * would otherwise walk the q8 kernels for an op it cannot tell apart) */
  int q8_normed = SHAPE.precision != QN_PREC_Q4 || cls != QN_MM_NORMED;
  int q8 = fmt == QN_PREC_Q8 && q8_normed && ops != QN_MM_ONLY_Q8A8, q4 = fmt == QN_PREC_Q4 && ops != QN_MM_ONLY_Q8A8;
  int q8a8 = SHAPE.precision != QN_PREC_Q24 && fmt == QN_PREC_Q8A8 && ops != QN_MM_NO_Q4 && ops != QN_MM_ONLY_Q4;
  u32 unit = fmt == QN_PREC_Q24 ? 2 : qn_unit_rows(fmt);
  st.row_step = st.op == QN_OP_GATEUP ? unit / 2 : unit;
  if (!q8) multi = 0;
  st.wf = weight_frac(&st.mat);
  u32 rows = st.op == QN_OP_GATEUP ? st.mat.rows / 2 : st.mat.rows;
  /* the packed q8 kernel is exact only for inputs within QN_Q8_ACT_BITS,
   * and the 8-bit inputs' scale needs them too */
  int bad_act = fmt != QN_PREC_Q24 && st.mat.act_bits > QN_Q8_ACT_BITS;
  if (!mm_op_in_class(st.op, cls) || st.thread >= SHAPE.threads || npos == 0 || npos > QN_PMAX ||
      row_end < st.row_begin || row_end > rows || bad_act || (fmt == QN_PREC_Q8 && !q8_normed) ||
      (fmt != QN_PREC_Q24 && st.row_begin % st.row_step != 0) ||
      st.mat.format != fmt || (q8a8 && cls != QN_MM_NORMED) ||
      st.mat.groups * QN_GROUP != (st.op == QN_OP_O ? QD_PAD : st.op == QN_OP_DOWN ? INTER_PAD : HID_PAD)) {
    a->status = __LINE__;
    return a->status;
  }
  u32 n = 0;
  for (u32 p = 0; p < QN_PMAX; p++) {
    if (p >= npos) break;
    if (st.op != QN_OP_VOCAB || ((mask >> p) & 1)) {
      st.comp_pos[n & (QN_PMAX - 1)] = (u8)p;
      n++;
    }
  }
  st.ncomp = n;
  if (n == 0) {
    a->status = 0;
    return 0;
  }
  qn_clear_err(st.thread);
  bpf_loop(n, cls == QN_MM_NORMED ? mm_prep_cb_normed : mm_prep_cb_proj, &st, 0);
  if (qn_err(st.thread)) {
    a->status = qn_err(st.thread);
    return a->status;
  }
  if (q4 || q8a8) {
    struct a8_state as = {st.thread, st.mat.groups * (QN_GROUP / QN_A8_GROUP)};
    bpf_loop(n * as.halves, mm_branch_cb(mm_a8_cb), &as, 0);
  }
  if (q8) {
    struct gsum_state gs = {st.thread, st.mat.groups};
    bpf_loop(n * gs.groups, mm_gsum_cb, &gs, 0);
    if (multi) {
      st.npb = (n + QN_Q8_PBLK - 1) / QN_Q8_PBLK;
      struct pack_state ps = {st.thread, n, st.mat.groups * (QN_GROUP / 8)};
      bpf_loop(st.npb * (QN_Q8_PBLK / 2) * ps.chunks, mm_pack_cb, &ps, 0);
    }
  }
  if (fmt != QN_PREC_Q24 && qn_err(st.thread)) { /* the 8-bit inputs, group sums or packed inputs */
    a->status = qn_err(st.thread);
    return a->status;
  }
  if (st.op == QN_OP_VOCAB && !a->topk_keep) {
    for (u32 c = 0; c < QN_PMAX; c++) {
      if (c >= n) break;
      struct qn_topk_slot *t = topk_slot(st.thread, c);
      if (!t) {
        a->status = __LINE__;
        return a->status;
      }
      t->argmax_id = -1;
      t->argmax_logit = 0;
      t->count = 0;
    }
  }
  u32 steps = (row_end - st.row_begin + st.row_step - 1) / st.row_step;
  if (q8 && multi)
    bpf_loop(steps * st.npb * QN_Q8M_PARTS, cls == QN_MM_NORMED ? mm_multi_cb_normed : mm_multi_cb_proj, &st, 0);
  else if (q4)
    bpf_loop(steps * n, cls == QN_MM_NORMED ? mm_branch_cb(mm_q4_cb_normed) : mm_branch_cb(mm_q4_cb_proj), &st, 0);
  else if (q8a8)
    bpf_loop(steps * n, mm_branch_cb(mm_q8a8_cb_normed), &st, 0);
  else
    bpf_loop(steps * n, cls == QN_MM_NORMED ? mm_row_cb_normed : mm_row_cb_proj, &st, 0);
  a->status = qn_err(st.thread);
  return a->status;
}

/* The one-position kernels (the decode programs; the kernel driver, ops_drive.h). */
static __always_inline int mm_main(struct qn_args *a, int cls, int ops) { return mm_run(a, cls, 0, ops); }

SEC("syscall")
int qn_matmul(struct qn_args *a) { return mm_main(a, QN_MM_NORMED, QN_MM_ANY); }

SEC("syscall")
int qn_matmul_proj(struct qn_args *a) { return mm_main(a, QN_MM_PROJ, QN_MM_ANY); }

/* q8 and q4 models only (user space loads them for those): several
 * positions per pass; a q4 model's q4 matrices run the q4 kernel per position. */
SEC("syscall")
int qn_matmul_pre(struct qn_args *a) {
  if (SHAPE.precision == QN_PREC_Q24) {
    a->status = __LINE__;
    return a->status;
  }
  return mm_run(a, QN_MM_NORMED, 1, QN_MM_ANY);
}

SEC("syscall")
int qn_matmul_proj_pre(struct qn_args *a) {
  if (SHAPE.precision == QN_PREC_Q24) {
    a->status = __LINE__;
    return a->status;
  }
  return mm_run(a, QN_MM_PROJ, 1, QN_MM_ANY);
}

#endif
