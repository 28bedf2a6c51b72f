/* qn_topk_merge: the workers' argmax and top-k lists of each of the npos
 * logit positions of a vocabulary pass -> one merged slot per position
 * (topk_buf key qn_topk_key(SHAPE.threads, c)). Workers own ascending row
 * ranges, so taking them in order with qn_topk_update (which keeps the
 * earlier id first among equal logits) yields the global argmax (lowest id
 * among equals) and the global top-k in (logit desc, id asc) order.
 */
#ifndef QWEN3_BPF_OPS_TOPK_H
#define QWEN3_BPF_OPS_TOPK_H

#include "ops_matmul.h"

struct merge_state {
  u32 npos, top_k;
};

static __always_inline struct qn_topk_slot *merged_slot(u32 c) {
  if (c >= QN_PMAX) return 0;
  return buf_lookup(&topk_buf, qn_topk_key(SHAPE.threads, c));
}

/* Item i = (position c, worker t), position-major. */
static long merge_cb(u64 i, void *ctx) {
  const struct merge_state *st = ctx;
  const u32 T = SHAPE.threads;
  if (T == 0) return 1;
  u32 c = (u32)i / T, t = (u32)i - c * T;
  struct qn_topk_slot *out = merged_slot(c);
  struct qn_topk_slot *in = topk_slot(t, c);
  if (!out || !in) return qn_fail(0, __LINE__);
  if (t == 0) {
    out->argmax_id = -1;
    out->argmax_logit = 0;
    out->count = 0;
  }
  if (in->argmax_id >= 0) qn_topk_update(out, in->argmax_id, in->argmax_logit, 0);
  s32 cnt = in->count;
  for (u32 j = 0; j < QN_TOPK_MAX; j++) {
    if ((s32)j >= cnt) break;
    qn_topk_update(out, in->e[j].id, in->e[j].logit, st->top_k);
  }
  return 0;
}

/* The body, also for a driver program that calls it as a global function. */
static __always_inline int merge_main(struct qn_args *a) {
  struct merge_state st = {a->npos, a->top_k};
  if (st.npos == 0 || st.npos > QN_PMAX || st.top_k > QN_TOPK_MAX) {
    a->status = __LINE__;
    return a->status;
  }
  qn_clear_err(0);
  bpf_loop(st.npos * SHAPE.threads, merge_cb, &st, 0);
  a->status = qn_err(0);
  return a->status;
}

SEC("syscall")
int qn_topk_merge(struct qn_args *a) { return merge_main(a); }

#endif
