/* qn_attention: for one session's positions of a pass (rows pass_off ..
 * pass_off + npos - 1, absolute positions pos0 ..), in order, and the KV heads
 * [head_begin, head_end) of this worker (with their query heads):
 *   k: RMSNorm(k_norm) -> RoPE -> [kv8: Hadamard] -> quantize -> the session's KV map
 *   v: [kv8: Hadamard] -> quantize -> KV map
 *   q: RMSNorm(q_norm) -> RoPE -> [kv8: Hadamard] -> requantize -> scores over
 *      cached positions 0..pos -> stable softmax (max subtracted, fixed-point
 *      exp) -> sum p*v -> [kv8: Hadamard back]
 * int16 K/V carry an int32 max per vector; the compact layout (kv_bytes 1)
 * packs a 9-bit K code and a 7-bit V code per element into one 16-bit word
 * and carries the log scale codes in the low bits of K codes 0..15 (numerics.h).
 * Causality holds because position p's K/V are written before p attends.
 * Workers own disjoint KV heads, so they never touch the same cache bytes.
 */
#ifndef QWEN3_BPF_OPS_ATTENTION_H
#define QWEN3_BPF_OPS_ATTENTION_H

#include "maps.h"

/* Constant for the whole call: callbacks read it and never write it, so the
 * verifier sees one state per loop. What changes per query head (position,
 * heads, query shift) lives in the per-worker acc map. */
struct att_state {
  u32 thread, npos, pos0, pass_off, layer, slot, qnorm_off, knorm_off, hb, nh, group;
  s64 c_q24;
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

/* Byte offsets inside one position's KV entry (layout in docs/kv-cache.md). */
static __always_inline int kv_compact(void) { return SHAPE.kv_bytes == 1; }
/* int16: one vector of K or V; compact: the K|V words of one kv head */
static __always_inline u32 kv_vec_bytes(void) { return SHAPE.head_dim * 2; }
static __always_inline s32 kv_levels(void) { return kv_compact() ? QN_KV8_K_LEVELS : QN_KV_LEVELS16; }
static __always_inline u32 kv_k_off(u32 layer, u32 h) {
  return layer * SHAPE.kv_layer_bytes + h * kv_vec_bytes();
}
static __always_inline u32 kv_v_off(u32 layer, u32 h) {
  if (kv_compact()) return kv_k_off(layer, h); /* the same words */
  return layer * SHAPE.kv_layer_bytes + (SHAPE.n_kv_heads + h) * kv_vec_bytes();
}
static __always_inline u32 kv_kmax_off(u32 layer, u32 h) {
  return layer * SHAPE.kv_layer_bytes + 2 * SHAPE.n_kv_heads * kv_vec_bytes() + h * 4;
}
static __always_inline u32 kv_vmax_off(u32 layer, u32 h) {
  return kv_kmax_off(layer, h) + SHAPE.n_kv_heads * 4;
}

/* In-place integer Walsh-Hadamard transform of x[0 .. hd) in blocks of
 * 2^lb = the lowest set bit of head_dim (unnormalized: applying it twice
 * multiplies by 2^lb). Exact in int64 for int32 inputs (growth <= 2^8). */
static __always_inline int kv8_lb(void) { return qn_kv8_block_log2(SHAPE.head_dim); }
static __always_inline void kv8_hadamard(s64 *x) {
  const int lb = kv8_lb();
  const u32 half = SHAPE.head_dim / 2;
  for (int st = 0; st < 8; st++) {
    if (st >= lb) break;
    u32 h = 1u << st;
    for (u32 i = 0; i < half; i++) {
      u32 a = ((i >> st) << (st + 1)) | (i & (h - 1)); /* i with a zero bit inserted at st */
      u32 c = a + h;
      if (c >= SHAPE.head_dim) break;
      s64 u = x[a], v = x[c];
      x[a] = u + v;
      x[c] = u - v;
    }
  }
}

/* A scale code hidden in the least significant bits of K codes first..first+7
 * (bit 7 of the words): K's at 0, V's at 8. */
static __always_inline s64 kv8_scale_code(const u8 *words, u32 first) {
  const short *w = (const short *)words + first;
  s64 e = 0;
#pragma unroll
  for (int i = 0; i < QN_KV8_SCALE_CODES; i++) e |= (s64)((w[i] >> QN_KV8_V_BITS) & 1) << i;
  return e;
}

/* Rotates x (int64, hd); returns its scale code. */
static __always_inline s64 kv8_rotate(s64 *x) {
  kv8_hadamard(x);
  u64 mx = 0;
  for (u32 d = 0; d < SHAPE.head_dim; d++) mx = (u64)qn_max64((s64)mx, (s64)qn_abs64(x[d]));
  return qn_kv8_code(mx);
}

/* The words of one kv head: V is rotated and coded into the low 7 bits first,
 * then K above it (so both can use the same int64 scratch, one after the other). */
static __always_inline void kv8_store_v(short *w, s64 *vx, s64 *ev) {
  s64 e = kv8_rotate(vx);
  for (u32 d = 0; d < SHAPE.head_dim; d++) w[d] = (short)qn_kv8_word(0, qn_kv8_quant(vx[d], e, QN_KV8_V_LEVELS));
  *ev = e;
}
static __always_inline void kv8_store_k(short *w, s64 *kx, s64 ev) {
  s64 e = kv8_rotate(kx);
  for (u32 d = 0; d < 2 * QN_KV8_SCALE_CODES; d++) {
    s64 bit = d < QN_KV8_SCALE_CODES ? (e >> d) & 1 : (ev >> (d - QN_KV8_SCALE_CODES)) & 1;
    w[d] = (short)qn_kv8_word(qn_kv8_quant_bit(kx[d], e, bit, QN_KV8_K_LEVELS), w[d]);
  }
  for (u32 d = 2 * QN_KV8_SCALE_CODES; d < SHAPE.head_dim; d++)
    w[d] = (short)qn_kv8_word(qn_kv8_quant(kx[d], e, QN_KV8_K_LEVELS), w[d]);
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
    mx = (u64)qn_max64((s64)mx, (s64)qn_abs64(v));
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
    mx = (u64)qn_max64(qn_max64((s64)mx, (s64)qn_abs64(a)), (s64)qn_abs64(z));
  }
  return (s64)mx;
}

static long att_score_cb(u64 j, void *ctx) {
  const struct att_state *st = ctx;
  u8 *b = att_scratch(st->thread);
  u8 *e = kv_entry(st->slot, (u32)j);
  struct qn_acc *acc = acc_of(st->thread);
  if (!b || !e || !acc || j >= SHAPE.max_ctx) return qn_fail(st->thread, __LINE__);
  u32 ko = kv_k_off(st->layer, acc->h), mo = kv_kmax_off(st->layer, acc->h);
  if (ko > SHAPE.kv_pos_bytes - kv_vec_bytes()) return qn_fail(st->thread, __LINE__);
  const u8 *kq = e + ko;
  const s32 *q = att_tmp1(b);
  const u32 hd = SHAPE.head_dim; /* read once: SHAPE is volatile */
  s64 dot = 0;
  s32 score;
  if (kv_compact()) {
    const short *kw = (const short *)kq;
    for (u32 d = 0; d < hd; d += 4) /* head_dim is a multiple of 8 (model_plan) */
      dot += (s64)q[d] * qn_kv8_kcode(kw[d]) + (s64)q[d + 1] * qn_kv8_kcode(kw[d + 1]) +
             (s64)q[d + 2] * qn_kv8_kcode(kw[d + 2]) + (s64)q[d + 3] * qn_kv8_kcode(kw[d + 3]);
    score = qn_kv8_score(dot, kv8_scale_code(kq, 0), acc->sq, kv8_lb(), st->c_q24);
  } else {
    const short *kw = (const short *)kq;
    for (u32 d = 0; d < hd; d += 4)
      dot += (s64)q[d] * kw[d] + (s64)q[d + 1] * kw[d + 1] + (s64)q[d + 2] * kw[d + 2] + (s64)q[d + 3] * kw[d + 3];
    if (mo > SHAPE.kv_pos_bytes - 4) return qn_fail(st->thread, __LINE__);
    dot = qn_round_shift(dot, qn_kv_dot_shift(kv_levels()));
    score = qn_attn_score(dot, *(const s32 *)(e + mo), acc->sq, st->c_q24);
  }
  att_scores(b)[j] = score;
  acc->smax = qn_max64(acc->smax, score);
  return 0;
}

static long att_exp_cb(u64 j, void *ctx) {
  const struct att_state *st = ctx;
  u8 *b = att_scratch(st->thread);
  struct qn_acc *acc = acc_of(st->thread);
  if (!b || !acc || j >= SHAPE.max_ctx) return qn_fail(st->thread, __LINE__);
  s32 *sc = att_scores(b);
  s64 e = qn_exp_neg_q30((s64)sc[j] - acc->smax);
  sc[j] = (s32)e;
  acc->sum += (u64)e;
  return 0;
}

static long att_acc_cb(u64 j, void *ctx) {
  const struct att_state *st = ctx;
  u8 *b = att_scratch(st->thread);
  if (!b || j >= SHAPE.max_ctx) return qn_fail(st->thread, __LINE__);
  /* exp weight 0 (score > 20.8 below the max): adds exactly nothing; skip the read */
  if (att_scores(b)[j] == 0) return 0;
  u8 *e = kv_entry(st->slot, (u32)j);
  struct qn_acc *acc = acc_of(st->thread);
  if (!e || !acc || acc->sum == 0) return qn_fail(st->thread, __LINE__);
  u32 vo = kv_v_off(st->layer, acc->h), mo = kv_vmax_off(st->layer, acc->h);
  if (vo > SHAPE.kv_pos_bytes - kv_vec_bytes()) return qn_fail(st->thread, __LINE__);
  const u8 *vq = e + vo;
  s64 p = qn_attn_prob(att_scores(b)[j], acc->sum);
  s64 w;
  if (kv_compact()) {
    w = qn_kv8_vweight(p, kv8_scale_code(vq, QN_KV8_SCALE_CODES));
  } else {
    if (mo > SHAPE.kv_pos_bytes - 4) return qn_fail(st->thread, __LINE__);
    w = qn_attn_vweight(p, *(const s32 *)(e + mo));
  }
  if (w == 0) return 0;
  s64 *accv = att_acc(b);
  const short *vw = (const short *)vq;
  const u32 hd = SHAPE.head_dim; /* read once: SHAPE is volatile */
  if (kv_compact()) {
    for (u32 d = 0; d < hd; d += 4) {
      accv[d] += w * qn_kv8_vcode(vw[d]);
      accv[d + 1] += w * qn_kv8_vcode(vw[d + 1]);
      accv[d + 2] += w * qn_kv8_vcode(vw[d + 2]);
      accv[d + 3] += w * qn_kv8_vcode(vw[d + 3]);
    }
  } else {
    for (u32 d = 0; d < hd; d += 4) {
      accv[d] += w * vw[d];
      accv[d + 1] += w * vw[d + 1];
      accv[d + 2] += w * vw[d + 2];
      accv[d + 3] += w * vw[d + 3];
    }
  }
  return 0;
}

/* One query head qh (of kv head h) at pass position p / absolute position pos. */
static __always_inline u32 attend_head(const struct att_state *st, u8 *b, u32 p, u32 pos, u32 h, u32 qh) {
  if (qh >= SHAPE.n_heads) return __LINE__;
  s64 mx = head_norm_rope(b, p, qh * SHAPE.head_dim, st->qnorm_off, pos);
  if (mx < 0) return __LINE__;
  struct qn_acc *acc = acc_of(st->thread);
  if (!acc) return __LINE__;
  s32 *t1 = att_tmp1(b);
  s64 *accv = att_acc(b);
  if (kv_compact()) { /* keys are stored rotated: rotate the query too (acc is free until below) */
    for (u32 d = 0; d < SHAPE.head_dim; d++) accv[d] = t1[d];
    kv8_hadamard(accv);
    u64 rmx = 0;
    for (u32 d = 0; d < SHAPE.head_dim; d++) rmx = (u64)qn_max64((s64)rmx, (s64)qn_abs64(accv[d]));
    mx = (s64)rmx;
  }
  s32 sq = qn_input_shift((u64)mx, QN_Q_BITS);
  acc->sq = sq;
  acc->h = h;
  acc->smax = -2147483647; /* every score is >= this (saturated) */
  acc->sum = 0;
  for (u32 d = 0; d < SHAPE.head_dim; d++) {
    t1[d] = (s32)qn_round_shift(kv_compact() ? accv[d] : t1[d], sq);
    accv[d] = 0;
  }
  u32 n = pos + 1;
  bpf_loop(n, att_score_cb, (void *)st, 0);
  bpf_loop(n, att_exp_cb, (void *)st, 0);
  bpf_loop(n, att_acc_cb, (void *)st, 0);
  if (qn_err(st->thread)) return qn_err(st->thread);
  s32 *out = buf_lookup(&attn_buf, 0);
  u32 o = qh * SHAPE.head_dim;
  if (!out || p >= QN_PMAX || o > QD_PAD - SHAPE.head_dim) return __LINE__;
  out += p * QD_PAD + o;
  if (kv_compact()) { /* the values were stored rotated: rotate the weighted sum back */
    for (u32 d = 0; d < SHAPE.head_dim; d++) accv[d] = qn_kv8_out_rot(accv[d]);
    kv8_hadamard(accv);
    for (u32 d = 0; d < SHAPE.head_dim; d++) out[d] = qn_kv8_out(accv[d], kv8_lb());
    return 0;
  }
  const s32 levels = kv_levels();
  for (u32 d = 0; d < SHAPE.head_dim; d++) out[d] = qn_attn_out(accv[d], levels);
  return 0;
}

/* Writes K (normed, RoPE-rotated) and V of kv head h at position pos. */
static __always_inline u32 write_kv(const struct att_state *st, u8 *b, u32 p, u32 pos, u32 h) {
  u8 *e = kv_entry(st->slot, pos);
  if (!e) return __LINE__;
  u32 layer = st->layer;
  s64 mx = head_norm_rope(b, p, SHAPE.q_dim + h * SHAPE.head_dim, st->knorm_off, pos);
  if (mx < 0) return __LINE__;
  u32 ko = kv_k_off(layer, h), vo = kv_v_off(layer, h);
  u32 km = kv_kmax_off(layer, h), vm = kv_vmax_off(layer, h);
  if (ko > SHAPE.kv_pos_bytes - kv_vec_bytes() || vo > SHAPE.kv_pos_bytes - kv_vec_bytes() ||
      (!kv_compact() && (km > SHAPE.kv_pos_bytes - 4 || vm > SHAPE.kv_pos_bytes - 4)))
    return __LINE__;
  s32 *t1 = att_tmp1(b);
  s32 *qkv = buf_lookup(&qkv_buf, 0);
  u32 off = SHAPE.q_dim + SHAPE.kv_dim + h * SHAPE.head_dim;
  if (!qkv || p >= QN_PMAX || off > QKV_PAD - SHAPE.head_dim) return __LINE__;
  const s32 *v = qkv + p * QKV_PAD + off;
  if (kv_compact()) { /* rotated in the acc scratch, free until attend_head clears it */
    s64 *x = att_acc(b);
    short *w = (short *)(e + ko);
    s64 ev = 0;
    for (u32 d = 0; d < SHAPE.head_dim; d++) x[d] = v[d];
    kv8_store_v(w, x, &ev);
    for (u32 d = 0; d < SHAPE.head_dim; d++) x[d] = t1[d];
    kv8_store_k(w, x, ev);
    return 0;
  }
  const s32 levels = kv_levels();
  s32 kmax = qn_sat32(mx);
  short *kq = (short *)(e + ko);
  for (u32 d = 0; d < SHAPE.head_dim; d++) kq[d] = (short)qn_kv_quant(t1[d], kmax, levels);
  *(s32 *)(e + km) = kmax;
  u64 vmx = 0;
  for (u32 d = 0; d < SHAPE.head_dim; d++) vmx = (u64)qn_max64((s64)vmx, (s64)qn_abs64(v[d]));
  s32 vmax = qn_sat32(vmx);
  short *vq = (short *)(e + vo);
  for (u32 d = 0; d < SHAPE.head_dim; d++) vq[d] = (short)qn_kv_quant(v[d], vmax, levels);
  *(s32 *)(e + vm) = vmax;
  return 0;
}

/* Item i = (position, kv head, query head of its group), position-major:
 * a kv head's K/V for a position are written (by its first query head's
 * item) before any query of that position attends. One flat loop keeps the
 * callback nesting, and so the verifier's work, small. */
static long att_item_cb(u64 i, void *ctx) {
  const struct att_state *st = ctx;
  u8 *b = att_scratch(st->thread);
  u32 per_pos = st->nh * st->group;
  if (!b || per_pos == 0 || st->group == 0) return qn_fail(st->thread, __LINE__);
  u32 idx = (u32)i;
  u32 k = idx / per_pos; /* k-th position of this session's slice */
  u32 p = st->pass_off + k;
  u32 rem = idx % per_pos;
  u32 h = st->hb + rem / st->group;
  u32 j = rem % st->group;
  QN_BARRIER(p);
  QN_BARRIER(h);
  u32 pos = st->pos0 + k;
  if (p >= QN_PMAX || h >= SHAPE.n_kv_heads) return qn_fail(st->thread, __LINE__);
  if (j == 0) {
    u32 e = write_kv(st, b, p, pos, h);
    if (e) return qn_fail(st->thread, e);
  }
  u32 qh = h * st->group + j;
  QN_BARRIER(qh);
  u32 e = attend_head(st, b, p, pos, h, qh);
  if (e) return qn_fail(st->thread, e);
  return 0;
}

SEC("syscall")
int qn_attention(struct qn_args *a) {
  struct att_state st = {};
  st.thread = a->thread;
  st.npos = a->npos;
  st.pos0 = a->pos0;
  st.pass_off = a->pass_off;
  st.layer = a->layer;
  st.slot = a->kv_slot;
  st.qnorm_off = a->norm_off;
  st.knorm_off = a->norm2_off;
  st.hb = a->head_begin;
  st.nh = a->head_end - a->head_begin;
  st.group = SHAPE.n_heads / SHAPE.n_kv_heads;
  st.c_q24 = qn_attn_scale_q24(SHAPE.head_dim, kv_levels());
  if (st.thread >= QN_THREADS_MAX || st.npos == 0 || st.npos > QN_PMAX || st.pass_off > QN_PMAX - st.npos ||
      a->head_begin >= a->head_end ||
      a->head_end > SHAPE.n_kv_heads || st.layer >= SHAPE.n_layers || (SHAPE.kv_bytes != 1 && SHAPE.kv_bytes != 2)) {
    a->status = __LINE__;
    return a->status;
  }
  qn_clear_err(st.thread);
  bpf_loop(st.npos * st.nh * st.group, att_item_cb, &st, 0);
  a->status = qn_err(st.thread);
  return a->status;
}

#endif
