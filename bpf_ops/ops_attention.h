/* qn_attention: for the positions of a pass, in order, and the KV heads
 * [head_begin, head_end) of this worker (with their query heads):
 *   k: RMSNorm(k_norm) -> RoPE -> int8 + max -> the session's KV map
 *   v: int8 + max -> KV map
 *   q: RMSNorm(q_norm) -> RoPE -> requantize -> scores over cached positions
 *      0..pos -> stable softmax (max subtracted, fixed-point exp) -> sum p*v
 * Causality holds because position p's K/V are written before p attends.
 * Workers own disjoint KV heads, so they never touch the same cache bytes.
 */
#ifndef QWEN3_BPF_OPS_ATTENTION_H
#define QWEN3_BPF_OPS_ATTENTION_H

#include "maps.h"

struct att_state {
  u32 thread, npos, pos0, layer, slot, qnorm_off, knorm_off, hb, he, group;
  u32 p, pos, h, qh;
  s64 c_q24;
  s32 sq, smax;
  u64 sum;
  u32 err;
};

static __always_inline u8 *att_scratch(u32 thread) { return buf_lookup(&att_buf, thread); }
static __always_inline s32 *att_scores(u8 *b) { return (s32 *)b; }
static __always_inline s64 *att_acc(u8 *b) { return (s64 *)(b + SHAPE.max_ctx * 4); }
static __always_inline s32 *att_tmp0(u8 *b) {
  return (s32 *)(b + SHAPE.max_ctx * 4 + SHAPE.head_dim * 8);
}
static __always_inline s32 *att_tmp1(u8 *b) {
  return (s32 *)(b + SHAPE.max_ctx * 4 + SHAPE.head_dim * 12);
}

static __always_inline u8 *kv_entry(u32 slot, u32 pos) {
  void *inner = bpf_map_lookup_elem(&kv_outer, &slot);
  if (!inner) return 0;
  return bpf_map_lookup_elem(inner, &pos);
}

/* Byte offsets inside one position's KV entry. */
static __always_inline u32 kv_k_off(u32 layer, u32 h) {
  return layer * SHAPE.kv_layer_bytes + h * SHAPE.head_dim;
}
static __always_inline u32 kv_v_off(u32 layer, u32 h) {
  return layer * SHAPE.kv_layer_bytes + (SHAPE.n_kv_heads + h) * SHAPE.head_dim;
}
static __always_inline u32 kv_kmax_off(u32 layer, u32 h) {
  return layer * SHAPE.kv_layer_bytes + 2 * SHAPE.n_kv_heads * SHAPE.head_dim + h * 4;
}
static __always_inline u32 kv_vmax_off(u32 layer, u32 h) {
  return kv_kmax_off(layer, h) + SHAPE.n_kv_heads * 4;
}

/* tmp0 = qkv[p][off .. off+hd), RMSNorm'd in place with norms[norm_off ..],
 * then rotated into tmp1; returns max |tmp1| (or -1 on a failed check). */
static __always_inline s64 head_norm_rope(u8 *b, u32 p, u32 off, u32 norm_off, u32 pos) {
  s32 *qkv = buf_lookup(&qkv_buf, 0);
  s32 *w = buf_lookup(&norms_buf, 0);
  s32 *rope = buf_lookup(&rope_buf, 0);
  if (!qkv || !w || !rope || p >= QN_PMAX || off > QKV_PAD - SHAPE.head_dim ||
      norm_off > SHAPE.norms_len - SHAPE.head_dim || pos >= ROPE_POSITIONS)
    return -1;
  s32 *t0 = att_tmp0(b);
  s32 *t1 = att_tmp1(b);
  const s32 *src = qkv + p * QKV_PAD + off;
  u64 mx = 0;
  for (u32 d = 0; d < SHAPE.head_dim; d++) {
    s32 v = src[d];
    t0[d] = v;
    u64 a = qn_abs64(v);
    if (a > mx) mx = a;
  }
  int t = qn_rms_reduce_shift(mx);
  u64 ss = 0;
  for (u32 d = 0; d < SHAPE.head_dim; d++) {
    s64 v = t0[d] >> t;
    ss += (u64)(v * v);
  }
  int sh = 0;
  s64 r = qn_rms_factor(ss, SHAPE.head_dim, t, SHAPE.eps_q32, &sh);
  for (u32 d = 0; d < SHAPE.head_dim; d++) t0[d] = qn_rms_apply(t0[d], r, sh, w[norm_off + d]);
  const s32 *cs = rope + pos * SHAPE.head_dim;
  u32 half = SHAPE.head_dim / 2;
  mx = 0;
  for (u32 d = 0; d < half; d++) {
    s32 c = cs[d], s = cs[half + d];
    s32 a = qn_rope_first(t0[d], t0[d + half], c, s);
    s32 z = qn_rope_second(t0[d], t0[d + half], c, s);
    t1[d] = a;
    t1[d + half] = z;
    u64 aa = qn_abs64(a), az = qn_abs64(z);
    if (aa > mx) mx = aa;
    if (az > mx) mx = az;
  }
  return (s64)mx;
}

static long att_score_cb(u64 j, void *ctx) {
  struct att_state *st = ctx;
  u8 *b = att_scratch(st->thread);
  u8 *e = kv_entry(st->slot, (u32)j);
  if (!b || !e || j >= SHAPE.max_ctx) { st->err = __LINE__; return 1; }
  u32 ko = kv_k_off(st->layer, st->h), mo = kv_kmax_off(st->layer, st->h);
  if (ko > SHAPE.kv_pos_bytes - SHAPE.head_dim || mo > SHAPE.kv_pos_bytes - 4) { st->err = __LINE__; return 1; }
  const s8 *kq = (const s8 *)(e + ko);
  const s32 *q = att_tmp1(b);
  s64 dot = 0;
  for (u32 d = 0; d < SHAPE.head_dim; d++) dot += (s64)q[d] * kq[d];
  s32 kmax = *(const s32 *)(e + mo);
  s32 score = qn_attn_score(dot, kmax, st->sq, st->c_q24);
  att_scores(b)[j] = score;
  if (j == 0 || score > st->smax) st->smax = score;
  return 0;
}

static long att_exp_cb(u64 j, void *ctx) {
  struct att_state *st = ctx;
  u8 *b = att_scratch(st->thread);
  if (!b || j >= SHAPE.max_ctx) { st->err = __LINE__; return 1; }
  s32 *sc = att_scores(b);
  s64 e = qn_exp_neg_q30((s64)sc[j] - st->smax);
  sc[j] = (s32)e;
  st->sum += (u64)e;
  return 0;
}

static long att_acc_cb(u64 j, void *ctx) {
  struct att_state *st = ctx;
  u8 *b = att_scratch(st->thread);
  u8 *e = kv_entry(st->slot, (u32)j);
  if (!b || !e || j >= SHAPE.max_ctx) { st->err = __LINE__; return 1; }
  u32 vo = kv_v_off(st->layer, st->h), mo = kv_vmax_off(st->layer, st->h);
  if (vo > SHAPE.kv_pos_bytes - SHAPE.head_dim || mo > SHAPE.kv_pos_bytes - 4) { st->err = __LINE__; return 1; }
  s32 vmax = *(const s32 *)(e + mo);
  s64 w = qn_attn_vweight(qn_attn_prob(att_scores(b)[j], st->sum), vmax);
  if (w == 0) return 0;
  const s8 *vq = (const s8 *)(e + vo);
  s64 *acc = att_acc(b);
  for (u32 d = 0; d < SHAPE.head_dim; d++) acc[d] += w * vq[d];
  return 0;
}

static long att_qhead_cb(u64 j, void *ctx) {
  struct att_state *st = ctx;
  u8 *b = att_scratch(st->thread);
  if (!b) { st->err = __LINE__; return 1; }
  st->qh = st->h * st->group + (u32)j;
  if (st->qh >= SHAPE.n_heads) { st->err = __LINE__; return 1; }
  s64 mx = head_norm_rope(b, st->p, st->qh * SHAPE.head_dim, st->qnorm_off, st->pos);
  if (mx < 0) { st->err = __LINE__; return 1; }
  st->sq = qn_input_shift((u64)mx, QN_Q_BITS);
  s32 *t1 = att_tmp1(b);
  s64 *acc = att_acc(b);
  for (u32 d = 0; d < SHAPE.head_dim; d++) {
    t1[d] = (s32)qn_round_shift(t1[d], st->sq);
    acc[d] = 0;
  }
  st->smax = 0;
  st->sum = 0;
  u32 n = st->pos + 1;
  bpf_loop(n, att_score_cb, st, 0);
  bpf_loop(n, att_exp_cb, st, 0);
  if (st->sum == 0) { st->err = __LINE__; return 1; }
  bpf_loop(n, att_acc_cb, st, 0);
  if (st->err) return 1;
  s32 *out = buf_lookup(&attn_buf, 0);
  u32 o = st->qh * SHAPE.head_dim;
  if (!out || st->p >= QN_PMAX || o > QD_PAD - SHAPE.head_dim) { st->err = __LINE__; return 1; }
  out += st->p * QD_PAD + o;
  for (u32 d = 0; d < SHAPE.head_dim; d++) out[d] = qn_attn_out(acc[d]);
  return 0;
}

/* Writes K (normed, rotated) and V of kv head h at position pos as int8. */
static __always_inline u32 write_kv(struct att_state *st, u8 *b) {
  u8 *e = kv_entry(st->slot, st->pos);
  if (!e) return __LINE__;
  u32 h = st->h, layer = st->layer;
  s64 mx = head_norm_rope(b, st->p, SHAPE.q_dim + h * SHAPE.head_dim, st->knorm_off, st->pos);
  if (mx < 0) return __LINE__;
  u32 ko = kv_k_off(layer, h), vo = kv_v_off(layer, h);
  u32 km = kv_kmax_off(layer, h), vm = kv_vmax_off(layer, h);
  if (ko > SHAPE.kv_pos_bytes - SHAPE.head_dim || vo > SHAPE.kv_pos_bytes - SHAPE.head_dim ||
      km > SHAPE.kv_pos_bytes - 4 || vm > SHAPE.kv_pos_bytes - 4)
    return __LINE__;
  s32 kmax = qn_sat32(mx);
  s32 *t1 = att_tmp1(b);
  s8 *kq = (s8 *)(e + ko);
  for (u32 d = 0; d < SHAPE.head_dim; d++) kq[d] = qn_kv_quant(t1[d], kmax);
  *(s32 *)(e + km) = kmax;

  s32 *qkv = buf_lookup(&qkv_buf, 0);
  u32 off = SHAPE.q_dim + SHAPE.kv_dim + h * SHAPE.head_dim;
  if (!qkv || st->p >= QN_PMAX || off > QKV_PAD - SHAPE.head_dim) return __LINE__;
  const s32 *v = qkv + st->p * QKV_PAD + off;
  u64 vmx = 0;
  for (u32 d = 0; d < SHAPE.head_dim; d++) {
    u64 a = qn_abs64(v[d]);
    if (a > vmx) vmx = a;
  }
  s32 vmax = qn_sat32(vmx);
  s8 *vq = (s8 *)(e + vo);
  for (u32 d = 0; d < SHAPE.head_dim; d++) vq[d] = qn_kv_quant(v[d], vmax);
  *(s32 *)(e + vm) = vmax;
  return 0;
}

static long att_head_cb(u64 i, void *ctx) {
  struct att_state *st = ctx;
  u8 *b = att_scratch(st->thread);
  if (!b) { st->err = __LINE__; return 1; }
  st->h = st->hb + (u32)i;
  if (st->h >= SHAPE.n_kv_heads) { st->err = __LINE__; return 1; }
  u32 e = write_kv(st, b);
  if (e) { st->err = e; return 1; }
  bpf_loop(st->group, att_qhead_cb, st, 0);
  return st->err ? 1 : 0;
}

static long att_pos_cb(u64 p, void *ctx) {
  struct att_state *st = ctx;
  st->p = (u32)p;
  st->pos = st->pos0 + (u32)p;
  bpf_loop(st->he - st->hb, att_head_cb, st, 0);
  return st->err ? 1 : 0;
}

SEC("syscall")
int qn_attention(struct qn_args *a) {
  struct att_state st = {};
  st.thread = a->thread;
  st.npos = a->npos;
  st.pos0 = a->pos0;
  st.layer = a->layer;
  st.slot = a->kv_slot;
  st.qnorm_off = a->norm_off;
  st.knorm_off = a->norm2_off;
  st.hb = a->head_begin;
  st.he = a->head_end;
  st.group = SHAPE.n_heads / SHAPE.n_kv_heads;
  st.c_q24 = qn_attn_scale_q24(SHAPE.head_dim);
  if (st.thread >= QN_THREADS_MAX || st.npos == 0 || st.npos > QN_PMAX || st.hb > st.he ||
      st.he > SHAPE.n_kv_heads || st.layer >= SHAPE.n_layers) {
    a->status = __LINE__;
    return a->status;
  }
  bpf_loop(st.npos, att_pos_cb, &st, 0);
  a->status = st.err;
  return st.err;
}

#endif
