/* The matmul program family: one program, five operations (qn_args.op), all
 * "prepare input -> rows [row_begin, row_end) x positions -> epilogue":
 *   QN_OP_QKV     rmsnorm(resid) @ Wqkv            -> qkv
 *   QN_OP_GATEUP  rmsnorm(resid) @ Wgu (row pairs) -> silu(gate) * up -> mlp
 *   QN_OP_O       attn @ Wo                        -> resid += (residual fused)
 *   QN_OP_DOWN    mlp @ Wdown                      -> resid +=
 *   QN_OP_VOCAB   rmsnorm(resid, final) @ Wlm      -> logits, argmax, top-k
 * Each weight row is fetched once per pass and dotted with every position of
 * the pass while it is hot in cache (batched prefill).
 */
#ifndef QWEN3_BPF_OPS_MATMUL_H
#define QWEN3_BPF_OPS_MATMUL_H

#include "ops_vector.h"
#include "ops_weights.h"

struct mm_state {
  struct qn_matrix mat;
  u32 op, thread, row_begin, ncomp, top_k, norm_off;
  u8 comp_pos[QN_PMAX]; /* compact index -> position in the pass */
};

static __always_inline struct qn_topk_slot *topk_slot(u32 thread, u32 c) {
  if (thread >= QN_THREADS_MAX || c >= QN_PMAX) return 0;
  return buf_lookup(&topk_buf, thread * QN_PMAX + c);
}

/* Keeps argmax (lowest id among equals) and the k best (sorted, earlier id
 * first among equals) of one position. */
static __always_inline void topk_update(struct qn_topk_slot *t, s32 id, s32 v, u32 k) {
  if (t->argmax_id < 0 || v > t->argmax_logit) {
    t->argmax_id = id;
    t->argmax_logit = v;
  }
  if (k == 0 || k > QN_TOPK_MAX) return;
  s32 cnt = t->count;
  if (cnt < 0 || cnt > QN_TOPK_MAX) return;
  if ((u32)cnt >= k && v <= t->e[(k - 1) & (QN_TOPK_MAX - 1)].logit) return;
  s32 j = (u32)cnt < k ? cnt : (s32)k - 1;
  for (int it = 0; it < QN_TOPK_MAX; it++) {
    u32 jj = (u32)j;
    QN_BARRIER(jj); /* keep an index the verifier can bound, not a walking pointer */
    if (jj == 0 || jj >= QN_TOPK_MAX) break;
    if (t->e[jj - 1].logit >= v) break;
    t->e[jj] = t->e[jj - 1];
    j = (s32)jj - 1;
  }
  u32 at = (u32)j;
  QN_BARRIER(at);
  if (at >= QN_TOPK_MAX) return;
  t->e[at].id = id;
  t->e[at].logit = v;
  if ((u32)cnt < k) t->count = cnt + 1;
}

/* One row (or gate/up row pair) against compact position c; 0 or an error line. */
static __always_inline u32 mm_row_pos(const struct mm_state *st, u32 r, u32 c) {
  s32 *x = xq_row(st->thread, c);
  u32 ocol[QN_OUT_COLS];
#pragma unroll
  for (int k = 0; k < QN_OUT_COLS; k++) {
    ocol[k] = st->mat.ocol[k];
    if (ocol[k] >= IN_PAD) return __LINE__;
  }
  s32 *shp = xq_shift_slot(st->thread, c);
  if (!x || !shp) return __LINE__;
  int s = *shp;
  if (s < -16 || s > 31) return __LINE__;
  int wf = weight_frac(&st->mat);
  if (s > wf) return __LINE__;
  u32 p = st->comp_pos[c & (QN_PMAX - 1)];
  if (p >= QN_PMAX) return __LINE__;
  /* the input length of each op is a load-time constant */
  u32 groups = st->op == QN_OP_O ? QD_PAD / QN_GROUP : st->op == QN_OP_DOWN ? INTER_PAD / QN_GROUP : HID_PAD / QN_GROUP;

  if (st->op == QN_OP_GATEUP) {
    const QN_WQ u8 *wg = weight_row(&st->mat, 2 * r);
    const QN_WQ u8 *wu = weight_row(&st->mat, 2 * r + 1);
    if (!wg || !wu) return __LINE__;
    s32 g = qn_matmul_out(weight_dot(wg, x, groups, ocol), wf, s);
    s32 u = qn_matmul_out(weight_dot(wu, x, groups, ocol), wf, s);
    s32 *out = buf_lookup(&mlp_buf, 0);
    u32 oi = p * INTER_PAD + r;
    QN_BARRIER(oi); /* check the final index right before the store */
    if (!out || r >= INTER_PAD || oi >= QN_PMAX * INTER_PAD) return __LINE__;
    out[oi] = qn_silu_mul(g, u);
    return 0;
  }

  const QN_WQ u8 *w = weight_row(&st->mat, r);
  if (!w) return __LINE__;
  s32 y = qn_matmul_out(weight_dot(w, x, groups, ocol), wf, s);
  if (st->op == QN_OP_QKV) {
    s32 *out = buf_lookup(&qkv_buf, 0);
    u32 oi = p * QKV_PAD + r;
    QN_BARRIER(oi);
    if (!out || r >= QKV_PAD || oi >= QN_PMAX * QKV_PAD) return __LINE__;
    out[oi] = y;
  } else if (st->op == QN_OP_O || st->op == QN_OP_DOWN) {
    s32 *out = buf_lookup(&resid_buf, 0);
    u32 oi = p * HID_PAD + r;
    QN_BARRIER(oi);
    if (!out || r >= HID_PAD || oi >= QN_PMAX * HID_PAD) return __LINE__;
    s32 *o = &out[oi];
    *o = qn_sat32((s64)*o + y);
  } else if (st->op == QN_OP_VOCAB) {
    s32 *out = buf_lookup(&logits_buf, 0);
    u32 oi = c * SHAPE.vocab + r;
    QN_BARRIER(oi);
    if (!out || r >= SHAPE.vocab || oi >= QN_PMAX * SHAPE.vocab) return __LINE__;
    out[oi] = y;
    struct qn_topk_slot *t = topk_slot(st->thread, c);
    if (!t) return __LINE__;
    topk_update(t, (s32)r, y, st->top_k);
  } else {
    return __LINE__;
  }
  return 0;
}

static long mm_pos_cb(u64 i, void *ctx) {
  struct mm_state *st = ctx;
  struct qn_acc *acc = acc_of(st->thread);
  if (!acc) return 1;
  u32 e = mm_row_pos(st, acc->row, (u32)i);
  return e ? qn_fail(st->thread, e) : 0;
}

static long mm_row_cb(u64 i, void *ctx) {
  struct mm_state *st = ctx;
  /* Callbacks never write the caller's stack: the verifier then sees one
   * state per loop and verifies each callback body once. */
  u32 r = st->row_begin + (u32)i;
  if (st->ncomp == 1) {
    u32 e = mm_row_pos(st, r, 0);
    if (e) return qn_fail(st->thread, e);
    return 0;
  }
  struct qn_acc *acc = acc_of(st->thread);
  if (!acc) return 1;
  acc->row = r;
  bpf_loop(st->ncomp, mm_pos_cb, st, 0);
  return qn_err(st->thread) ? 1 : 0;
}

static long mm_prep_cb(u64 i, void *ctx) {
  struct mm_state *st = ctx;
  struct prep_state ps = {};
  ps.op = st->op;
  ps.thread = st->thread;
  ps.c = (u32)i;
  ps.p = st->comp_pos[i & (QN_PMAX - 1)];
  ps.act_bits = st->mat.act_bits;
  ps.norm_off = st->norm_off;
  int with_norm = 1;
  if (st->op == QN_OP_O) {
    ps.n_pad = QD_PAD;
    with_norm = 0;
  } else if (st->op == QN_OP_DOWN) {
    ps.n_pad = INTER_PAD;
    with_norm = 0;
  } else {
    ps.n_pad = HID_PAD;
    ps.n_true = SHAPE.hidden;
  }
  u32 e = prep_input(&ps, with_norm);
  return e ? qn_fail(st->thread, e) : 0;
}

SEC("syscall")
int qn_matmul(struct qn_args *a) {
  struct mm_state st = {};
  st.mat = a->mat;
  st.op = a->op;
  st.thread = a->thread;
  st.row_begin = a->row_begin;
  st.top_k = a->top_k;
  st.norm_off = a->norm_off;
  u32 npos = a->npos, mask = a->pos_mask, row_end = a->row_end;
  u32 rows = st.op == QN_OP_GATEUP ? st.mat.rows / 2 : st.mat.rows;
  if (st.thread >= QN_THREADS_MAX || npos == 0 || npos > QN_PMAX || row_end < st.row_begin ||
      row_end > rows ||
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
  bpf_loop(n, mm_prep_cb, &st, 0);
  if (qn_err(st.thread)) {
    a->status = qn_err(st.thread);
    return a->status;
  }
  if (st.op == QN_OP_VOCAB) {
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
  bpf_loop(row_end - st.row_begin, mm_row_cb, &st, 0);
  a->status = qn_err(st.thread);
  return a->status;
}

#endif
