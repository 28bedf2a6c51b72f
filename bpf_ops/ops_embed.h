/* qn_embed: token ids -> rows of the embedding matrix, dequantized to Q16
 * residual vectors (resid[p]) for the positions of a pass. */
#ifndef QWEN3_BPF_OPS_EMBED_H
#define QWEN3_BPF_OPS_EMBED_H

#include "ops_weights.h"

struct emb_state {
  struct qn_matrix mat;
  s32 tokens[QN_PMAX];
  u32 thread;
};

/* One group of a row (bpf_loop over the groups): the verifier checks it once
 * per program, not once per group, so the embedding's budget does not grow
 * with the hidden size. The kernel driver's control program (ops_drive.h)
 * explores this body about 17 times: unrolled per group it passed 1M
 * processed instructions above hidden 1664 (Qwen3-1.7B and larger). */
struct emb_group_ctx {
  const QN_WQ u8 *row;
  s32 *out;
  u32 j;
  int wf;
  u32 fmt;
};

static long emb_group_cb(u64 i, void *ctx) {
  struct emb_group_ctx *gc = ctx;
  u32 g = (u32)i;
  QN_BARRIER(g);
  if (g >= HID_PAD / QN_GROUP || g >= SHAPE.max_groups) return 1; /* bounds out and the row (max_row_bytes) */
  s32 *out = gc->out;
#pragma unroll
  for (int k = 0; k < QN_GROUP; k++) out[g * QN_GROUP + k] = weight_q16(gc->row, gc->j, g, k, gc->wf, gc->fmt);
  return 0;
}

static long emb_pos_cb(u64 p, void *ctx) {
  struct emb_state *st = ctx;
  s32 *out = buf_lookup(&resid_buf, 0);
  if (!out || p >= QN_PMAX) return qn_fail(st->thread, __LINE__);
  s32 tok = st->tokens[p & (QN_PMAX - 1)];
  if (tok < 0 || (u32)tok >= st->mat.rows) return qn_fail(st->thread, __LINE__);
  u32 j = 0;
  const QN_WQ u8 *row = weight_unit_of(&st->mat, (u32)tok, &j);
  if (!row) return qn_fail(st->thread, __LINE__);
  out += p * HID_PAD;
  int wf = weight_frac(&st->mat);
  u32 fmt = embed_format();
  struct emb_group_ctx gc = {row, out, j, wf, fmt};
  bpf_loop(st->mat.groups, emb_group_cb, &gc, 0);
  if (fmt != QN_PREC_Q24) {
    /* outlier columns: their int8 slots are zero; add the exact int64 weights */
    u32 groups = st->mat.groups;
    if (groups > SHAPE.max_groups) return qn_fail(0, __LINE__);
    const QN_WQ s64 *wo = weight_q8_tail(row, groups, j, fmt);
    if (!wo) return qn_fail(0, __LINE__);
#pragma unroll
    for (int k = 0; k < QN_OUT_COLS; k++) {
      u32 c = st->mat.ocol[k];
      if (c >= HID_PAD) return qn_fail(0, __LINE__);
      out[c] = qn_sat32((s64)out[c] + qn_round_shift(wo[k], wf - QN_ACT_FRAC));
    }
  }
  return 0;
}

/* The body, also for a driver program that calls it as a global function. */
static __always_inline int emb_main(struct qn_args *a) {
  struct emb_state st = {};
  st.mat = a->mat;
  u32 npos = a->npos;
#pragma unroll
  for (int i = 0; i < QN_PMAX; i++) st.tokens[i] = a->tokens[i];
  if (npos == 0 || npos > QN_PMAX || st.mat.groups * QN_GROUP != HID_PAD || st.mat.wfrac < QN_ACT_FRAC ||
      st.mat.format != embed_format()) {
    a->status = __LINE__;
    return a->status;
  }
  qn_clear_err(0);
  bpf_loop(npos, emb_pos_cb, &st, 0);
  a->status = qn_err(0);
  return a->status;
}

SEC("syscall")
int qn_embed(struct qn_args *a) { return emb_main(a); }

#endif
