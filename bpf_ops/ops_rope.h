/* qn_rope_table: rows [row_begin, row_end) of the RoPE table (rope_buf: per
 * position [hd/2] cos then [hd/2] sin, Q30), computed at load from
 * SHAPE.rope_theta_q16 with the integer math of numerics_rope.h (qn_sincos_turns).
 * Workers take disjoint position ranges. The C++ model is
 * daemon/engine/rope_table.cpp: rope_table_model.
 */
#ifndef QWEN3_BPF_OPS_ROPE_H
#define QWEN3_BPF_OPS_ROPE_H
#include "maps.h"
#include "numerics_rope.h"

struct rope_state {
  u64 log2_theta; /* Q57 */
  u32 thread, pos_begin, npos;
};
/* One frequency: what the per-position callback reads. */
struct rope_freq {
  u64 f; /* Q64 turns per position */
  u32 i, thread, pos_begin;
};

static long rope_pos_cb(u64 k, void *ctx) {
  const struct rope_freq *fr = ctx;
  s32 *t = buf_lookup(&rope_buf, 0);
  u32 pos = fr->pos_begin + (u32)k, i = fr->i;
  const u32 half = SHAPE.head_dim / 2;
  QN_BARRIER(pos);
  if (!t || pos >= ROPE_POSITIONS || i >= half) return qn_fail(fr->thread, __LINE__);
  s32 c = 0, s = 0;
  qn_sincos_turns((u64)pos * fr->f, &c, &s);
  u32 at = pos * SHAPE.head_dim + i;
  QN_BARRIER(at);
  if (at > ROPE_POSITIONS * SHAPE.head_dim - half - 1) return qn_fail(fr->thread, __LINE__);
  t[at] = c;
  t[at + half] = s;
  return 0;
}

static long rope_freq_cb(u64 i, void *ctx) {
  const struct rope_state *st = ctx;
  struct rope_freq fr = {};
  fr.i = (u32)i;
  fr.thread = st->thread;
  fr.pos_begin = st->pos_begin;
  fr.f = qn_rope_freq_q64(st->log2_theta, (u32)i, SHAPE.head_dim);
  bpf_loop(st->npos, rope_pos_cb, &fr, 0);
  return qn_err(st->thread) ? 1 : 0;
}

SEC("syscall")
int qn_rope_table(struct qn_args *a) {
  struct rope_state st = {};
  st.thread = a->thread;
  st.pos_begin = a->row_begin;
  u64 theta = SHAPE.rope_theta_q16;
  if (st.thread >= SHAPE.threads || a->row_end < a->row_begin || a->row_end > ROPE_POSITIONS ||
      theta < (1ULL << 17) || theta >= (1ULL << 62) || SHAPE.head_dim < 2) {
    a->status = __LINE__;
    return a->status;
  }
  st.npos = a->row_end - a->row_begin;
  st.log2_theta = qn_log2_q16_q57(theta);
  qn_clear_err(st.thread);
  bpf_loop(SHAPE.head_dim / 2, rope_freq_cb, &st, 0);
  a->status = qn_err(st.thread);
  return a->status;
}

#endif
