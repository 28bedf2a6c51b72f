/* qn_attention: for one session's positions of a pass (rows pass_off ..
 * pass_off + npos - 1, absolute positions pos0 ..), in order, and the KV heads
 * [head_begin, head_end) of this worker (with their query heads):
 *   k: RMSNorm(k_norm) -> RoPE -> [kv8: Hadamard] -> quantize -> the session's KV map
 *   v: [kv8: Hadamard] -> quantize -> KV map
 *   q: RMSNorm(q_norm) -> RoPE -> [kv8: Hadamard] -> requantize -> scores over
 *      cached positions 0..pos -> stable softmax (max subtracted, fixed-point
 *      exp) -> sum p*v -> [kv8: Hadamard back]
 * The query heads of a kv head's GQA group run together: each pass over the
 * cached positions (scores, exp, weighted V sum) looks an entry up once and
 * reads each K/V word once for all of them; with the compact layout a pair of
 * heads also shares each 64-bit multiply (two 32-bit lanes, numerics_kv.h:
 * qn_lanes). Per head the integer math is that of tests/bpf/fixed_model.h
 * (attend, attend_kv8), head by head.
 * int16 K/V carry an int32 max per vector; the compact layout (kv_bytes 1)
 * packs a 9-bit K code and a 7-bit V code per element into one 16-bit word
 * and carries the log scale codes in the low bits of K codes 0..15 (numerics_kv.h).
 * A cache entry holds QN_KV_BLOCK positions of one kv head and layer
 * (layout.h): each pass reads a head's records in address order, one lookup
 * per chunk of positions.
 * Causality holds because position p's K/V are written before p attends.
 * Workers own disjoint KV heads, so they never touch the same cache bytes.
 */
#ifndef QWEN3_BPF_OPS_ATTENTION_H
#define QWEN3_BPF_OPS_ATTENTION_H
#include "maps.h"
#include "numerics_kv.h"

/* Constant for the whole call: callbacks read it and never write it, so the
 * verifier sees one state per loop. What changes per item (pass row,
 * position, kv head) lives in the per-worker acc map, the state of each query
 * head of the group (softmax max and sum, query shift) in the scratch. */
struct att_state {
  u32 thread, npos, pos0, pass_off, layer, slot, qnorm_off, knorm_off, hb, nh;
  s64 c_q24;
};

static __always_inline u8 *att_scratch(u32 thread) { return buf_lookup(&att_buf, thread); }

/* Query heads per kv head (GQA group), set at load: the verifier does not
 * track the result of a division, so n_heads / n_kv_heads would be unbounded. */
const volatile u32 ATT_GROUP = 1;
static __always_inline u32 att_group(void) { return ATT_GROUP; }
/* Scratch of one kv head's group: layout.h (qn_att_*). */
static __always_inline s32 *att_scores(u8 *b, u32 j) {
  return (s32 *)(b + qn_att_scores_off(att_group(), SHAPE.max_ctx, SHAPE.head_dim, j));
}
static __always_inline s64 *att_acc(u8 *b, u32 j) {
  return (s64 *)(b + qn_att_acc_off(att_group(), SHAPE.max_ctx, SHAPE.head_dim, j));
}
static __always_inline s32 *att_q(u8 *b, u32 j) {
  return (s32 *)(b + qn_att_q_off(att_group(), SHAPE.max_ctx, SHAPE.head_dim, j));
}
static __always_inline s32 *att_tmp0(u8 *b) {
  return (s32 *)(b + qn_att_tmp0_off(att_group(), SHAPE.max_ctx, SHAPE.head_dim));
}
static __always_inline s32 *att_tmp1(u8 *b) {
  return (s32 *)(b + qn_att_tmp1_off(att_group(), SHAPE.max_ctx, SHAPE.head_dim));
}
static __always_inline struct qn_att_head *att_heads(u8 *b) {
  return (struct qn_att_head *)(b + qn_att_heads_off(att_group(), SHAPE.max_ctx, SHAPE.head_dim));
}
/* The session's cache entries and records: layout.h (qn_kv_*). */
static __always_inline int kv_compact(void) { return SHAPE.kv_bytes == 1; }
static __always_inline s32 kv_levels(void) { return kv_compact() ? QN_KV8_K_LEVELS : QN_KV_LEVELS16; }
static __always_inline u32 kv_v_off(void) { return qn_kv_v_off(SHAPE.head_dim, SHAPE.kv_bytes); }
static __always_inline u32 kv_kmax_off(void) { return qn_kv_kmax_off(SHAPE.head_dim); }
static __always_inline u32 kv_vmax_off(void) { return qn_kv_vmax_off(SHAPE.head_dim); }
/* The entry of the block holding position pos of kv head h in layer. */
static __always_inline u8 *kv_block(void *kv, u32 layer, u32 h, u32 pos) {
  u32 key = qn_kv_key(SHAPE.n_layers, SHAPE.n_kv_heads, layer, h, pos);
  return bpf_map_lookup_elem(kv, &key);
}
/* Position pos's record in its block's entry e (0 if a check fails). */
static __always_inline u8 *kv_rec(u8 *e, u32 pos) {
  u32 off = qn_kv_rec_off(SHAPE.kv_rec_bytes, pos);
  if (off > SHAPE.kv_entry_bytes - SHAPE.kv_rec_bytes) return 0;
  return e + off;
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
 * (bit 7 of the words): K's at 0, V's at 8. Four words per u64 load; one
 * multiply gathers their four bits (at 0, 16, 32, 48) into bits 45..48
 * (16i + 15(3 - i) = 45 + i, and no other pair of terms lands there). */
static __always_inline s64 kv8_scale_nibble(u64 w) {
  return (s64)(((((w >> QN_KV8_V_BITS) & 0x0001000100010001ULL) * 0x0000200040008001ULL) >> 45) & 15);
}
static __always_inline s64 kv8_scale_code(const u8 *words, u32 first) {
  const u64 *w = (const u64 *)((const short *)words + first); /* first is 0 or 8: 8-byte aligned */
  return kv8_scale_nibble(w[0]) | kv8_scale_nibble(w[1]) << 4;
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

/* Dot products of one cached K vector with query q0 and, when two, q1: one
 * read of each K word serves both heads. Pointers walk with a constant trip
 * count so the JIT sees immediate offsets and nothing spills. */
static __always_inline void att_dots(const short *kw, const s32 *q0, const s32 *q1, u32 hd, int compact, int two,
                                     s64 *dot0, s64 *dot1) {
  s64 d0 = 0, d1 = 0;
  for (u32 n = hd / 4; n; n--) { /* head_dim is a multiple of 8 (model_plan) */
#pragma unroll
    for (int t = 0; t < 4; t++) {
      s64 k = compact ? qn_kv8_kcode(kw[t]) : kw[t];
      d0 += (s64)q0[t] * k;
      if (two) d1 += (s64)q1[t] * k;
    }
    kw += 4;
    q0 += 4;
    q1 += 4;
  }
  *dot0 = d0;
  *dot1 = d1;
}

/* The compact layout's pairs of query heads (j, j + 1) share each multiply
 * (numerics_kv.h: qn_lanes): q of the pair sits packed in att_acc(j + 1) while
 * the scores are computed, the weighted V sums accumulate packed in
 * att_acc(j) and are unpacked before the output.
 * Scores: eight elements per asm block, 5 instructions per element (clang's
 * 7 spent copies on the shifts); a sign-extending 16-bit load and one
 * arithmetic shift make the 9-bit K code at the top of the word. */
#define ATT_QK_DIM(ok, oq)                \
  "%[k] = *(s16 *)(%[kw] + " ok ")\n\t" \
  "%[k] s>>= 7\n\t"                     \
  "%[q] = *(u64 *)(%[qp] + " oq ")\n\t" \
  "%[k] *= %[q]\n\t"                    \
  "%[t] += %[k]\n\t"

static __always_inline u64 att_qk8_asm(const short *kw, const u64 *qp, u64 t) {
  u64 k, q;
  asm volatile(ATT_QK_DIM("0", "0") ATT_QK_DIM("2", "8") ATT_QK_DIM("4", "16") ATT_QK_DIM("6", "24")
               ATT_QK_DIM("8", "32") ATT_QK_DIM("10", "40") ATT_QK_DIM("12", "48") ATT_QK_DIM("14", "56")
               : [t] "+r"(t), [k] "=&r"(k), [q] "=&r"(q)
               : [kw] "r"(kw), [qp] "r"(qp)
               : "memory");
  return t;
}

static __always_inline void att_dots_lanes(const short *kw, const u64 *qp, u32 hd, s64 *dot0, s64 *dot1) {
  u64 t = 0;
  for (u32 n = hd / 8; n; n--) { /* head_dim is a multiple of 8 (model_plan) */
    t = att_qk8_asm(kw, qp, t);
    kw += 8;
    qp += 8;
  }
  *dot0 = qn_lane_lo(t);
  *dot1 = qn_lane_hi(t);
}

/* Weighted V sums: each u64 load brings four K|V words (little endian: word
 * t in bits 16t..16t+15); two shifts cut out the 7-bit V code at the bottom,
 * sign-extended. (Two positions per pass over the sums measured slower.) */
#define VCODE(w, t) ((u64)((s64)((w) << (57 - 16 * (t))) >> 57))

static __always_inline void att_axpy_lanes(const u64 *vw, u64 *a, u64 wp, u32 hd) {
  for (u32 n = hd / 4; n; n--) {
    u64 w = *vw;
    a[0] += wp * VCODE(w, 0);
    a[1] += wp * VCODE(w, 1);
    a[2] += wp * VCODE(w, 2);
    a[3] += wp * VCODE(w, 3);
    vw++;
    a += 4;
  }
}

/* Adds one cached V vector weighted by w0 (and, when two, w1) to a0 (a1). */
static __always_inline void att_axpy(const short *vw, s64 *a0, s64 *a1, s64 w0, s64 w1, u32 hd, int compact,
                                     int two) {
  for (u32 n = hd / 4; n; n--) {
#pragma unroll
    for (int t = 0; t < 4; t++) {
      s64 v = compact ? qn_kv8_vcode(vw[t]) : vw[t];
      a0[t] += w0 * v;
      if (two) a1[t] += w1 * v;
    }
    vw += 4;
    a0 += 4;
    a1 += 4;
  }
}

/* Stores the score of cached position pos for the head with state hh. */
static __always_inline void att_score_store(const struct att_state *st, struct qn_att_head *hh, s32 *sc, s64 dot,
                                            s64 kscale, int compact) {
  s32 score;
  if (compact)
    score = qn_kv8_score(dot, kscale, (int)hh->sq, (int)hh->lb, st->c_q24);
  else
    score = qn_attn_score(qn_round_shift(dot, qn_kv_dot_shift(QN_KV_LEVELS16)), (s32)kscale, (int)hh->sq, st->c_q24);
  *sc = score;
  hh->smax = qn_max64(hh->smax, score);
}

/* Scores of cached position pos for query heads j and, when two, j + 1. */
static __always_inline void att_score_heads(const struct att_state *st, u8 *b, const short *kw, s64 kscale,
                                            u32 pos, u32 j, int compact, int two) {
  s64 d0, d1;
  if (compact && two)
    att_dots_lanes(kw, (const u64 *)att_acc(b, j + 1), SHAPE.head_dim, &d0, &d1);
  else
    att_dots(kw, att_q(b, j), att_q(b, j + two), SHAPE.head_dim, compact, two, &d0, &d1);
  struct qn_att_head *hs = att_heads(b);
  att_score_store(st, &hs[j], att_scores(b, j) + pos, d0, kscale, compact);
  if (two) att_score_store(st, &hs[j + 1], att_scores(b, j + 1) + pos, d1, kscale, compact);
}

/* Query heads are taken in pairs (n_heads / n_kv_heads is 2 at the 0.6B
 * shape); an odd group ends with a single head. */
static __always_inline long att_score_pos(const struct att_state *st, u8 *b, u8 *blk, u32 pos, int compact) {
  if (pos >= SHAPE.max_ctx) return qn_fail(st->thread, __LINE__);
  u8 *r = kv_rec(blk, pos);
  if (!r) return qn_fail(st->thread, __LINE__);
  s64 kscale;
  const u32 g = att_group();
  if (compact) {
    kscale = kv8_scale_code(r, 0);
    s64 voct = kv8_scale_code(r, QN_KV8_SCALE_CODES) >> 3; /* K and V share the words */
    struct qn_att_head *hs = att_heads(b);
    for (u32 j = 0; j < g; j++) hs[j].voct = qn_max64(hs[j].voct, voct);
  } else {
    kscale = *(const s32 *)(r + kv_kmax_off());
  }
  const short *kw = (const short *)(r + qn_kv_k_off());
  u32 j = 0;
  for (; j + 1 < g; j += 2) att_score_heads(st, b, kw, kscale, pos, j, compact, 1);
  if (j < g) att_score_heads(st, b, kw, kscale, pos, j, compact, 0);
  return 0;
}
/* Positions per callback of the passes over the cache: the call, the
 * scratch lookups and the session's map lookups are paid once per chunk.
 * A chunk lies inside one cache entry (QN_KV_BLOCK is a multiple). */
#define ATT_CHUNK 16
_Static_assert(QN_KV_BLOCK % ATT_CHUNK == 0, "a chunk of positions must not straddle two cache entries");
/* The weighted V sums take fewer positions per callback: their body is the
 * longest, and the verifier of kernel 6.18.44 follows each position's paths
 * (skip or not) further than older ones did. */
#define ATT_ACC_CHUNK 8
_Static_assert(QN_KV_BLOCK % ATT_ACC_CHUNK == 0, "a chunk of positions must not straddle two cache entries");

/* The cache entry holding chunk i of kv head acc->h (0 if a lookup fails). */
static __always_inline u8 *att_chunk_block(const struct att_state *st, const struct qn_acc *acc, u32 first_pos) {
  u32 slot = st->slot;
  void *kv = bpf_map_lookup_elem(&kv_outer, &slot);
  if (!kv) return 0;
  return kv_block(kv, st->layer, acc->h, first_pos);
}

static __always_inline long att_score_chunk(const struct att_state *st, u64 i, int compact) {
  u8 *b = att_scratch(st->thread);
  struct qn_acc *acc = acc_of(st->thread);
  if (!b || !acc) return qn_fail(st->thread, __LINE__);
  u8 *blk = att_chunk_block(st, acc, (u32)i * ATT_CHUNK);
  if (!blk) return qn_fail(st->thread, __LINE__);
  const u32 n = acc->pos + 1;
  for (u32 t = 0; t < ATT_CHUNK; t++) {
    u32 pos = (u32)i * ATT_CHUNK + t;
    if (pos >= n) break;
    long r = att_score_pos(st, b, blk, pos, compact);
    if (r) return r;
  }
  return 0;
}
/* One callback per layout: the layout test stays out of the inner loops. */
static long att_score_cb(u64 i, void *ctx) {
  const struct att_state *st = ctx;
  return kv_compact() ? att_score_chunk(st, i, 1) : att_score_chunk(st, i, 0);
}

static long att_exp_cb(u64 i, void *ctx) {
  const struct att_state *st = ctx;
  u8 *b = att_scratch(st->thread);
  struct qn_acc *acc = acc_of(st->thread);
  if (!b || !acc) return qn_fail(st->thread, __LINE__);
  const u32 n = acc->pos + 1;
  struct qn_att_head *hs = att_heads(b);
  const u32 g = att_group();
  for (u32 t = 0; t < ATT_CHUNK; t++) {
    u32 pos = (u32)i * ATT_CHUNK + t;
    if (pos >= n) break;
    if (pos >= SHAPE.max_ctx) return qn_fail(st->thread, __LINE__);
    for (u32 j = 0; j < g; j++) {
      s32 *sc = att_scores(b, j) + pos;
      s64 d = (s64)*sc - hs[j].smax;
      s64 x = qn_attn_exp_q30(d); /* two table loads: cheaper than a mispredicted skip */
      *sc = (s32)x;
      hs[j].sum += (u64)x;
    }
  }
  return 0;
}

/* Weight of a cached value vector for one head; exactly 0 for exp weight 0. */
static __always_inline s64 att_vweight(s32 e_q30, const struct qn_att_head *hh, s64 vscale, int compact) {
  if (compact) return qn_kv8_vweight(qn_kv8_prob(e_q30, hh->inv), vscale, hh->voct);
  return qn_attn_vweight(qn_attn_prob(e_q30, hh->sum), (s32)vscale);
}

/* Adds the cached value vector at vw, weighted, to the sums of query heads j
 * and, when two, j + 1: one read of each V word serves both heads. */
static __always_inline void att_acc_heads(u8 *b, const short *vw, s64 vscale, u32 pos, u32 j, int compact, int two) {
  struct qn_att_head *hs = att_heads(b);
  s64 w0 = att_vweight(att_scores(b, j)[pos], &hs[j], vscale, compact);
  s64 w1 = two ? att_vweight(att_scores(b, j + 1)[pos], &hs[j + 1], vscale, compact) : 0;
  if (w0 == 0 && w1 == 0) return; /* adds exactly nothing */
  if (compact && two)
    att_axpy_lanes((const u64 *)vw, (u64 *)att_acc(b, j), qn_lanes(w0, w1), SHAPE.head_dim);
  else
    att_axpy(vw, att_acc(b, j), att_acc(b, j + two), w0, w1, SHAPE.head_dim, compact, two);
}

static __always_inline long att_acc_pos(const struct att_state *st, u8 *b, u8 *blk, u32 pos, int compact) {
  if (pos >= SHAPE.max_ctx) return qn_fail(st->thread, __LINE__);
  const u32 g = att_group();
  /* exp weight 0 in every head (score > 20.8 below each max): skip the read */
  s32 any = 0;
  for (u32 j = 0; j < g; j++) any |= att_scores(b, j)[pos];
  if (any == 0) return 0;
  u8 *r = kv_rec(blk, pos);
  if (!r) return qn_fail(st->thread, __LINE__);
  s64 vscale;
  if (compact)
    vscale = kv8_scale_code(r, QN_KV8_SCALE_CODES);
  else
    vscale = *(const s32 *)(r + kv_vmax_off());
  const short *vw = (const short *)(r + kv_v_off());
  u32 j = 0;
  for (; j + 1 < g; j += 2) att_acc_heads(b, vw, vscale, pos, j, compact, 1);
  if (j < g) att_acc_heads(b, vw, vscale, pos, j, compact, 0);
  return 0;
}
static __always_inline long att_acc_chunk(const struct att_state *st, u64 i, int compact) {
  u8 *b = att_scratch(st->thread);
  struct qn_acc *acc = acc_of(st->thread);
  if (!b || !acc) return qn_fail(st->thread, __LINE__);
  u8 *blk = att_chunk_block(st, acc, (u32)i * ATT_ACC_CHUNK);
  if (!blk) return qn_fail(st->thread, __LINE__);
  const u32 n = acc->pos + 1;
  for (u32 t = 0; t < ATT_ACC_CHUNK; t++) {
    u32 pos = (u32)i * ATT_ACC_CHUNK + t;
    if (pos >= n) break;
    long r = att_acc_pos(st, b, blk, pos, compact);
    if (r) return r;
  }
  return 0;
}
static long att_acc_cb(u64 i, void *ctx) {
  const struct att_state *st = ctx;
  return kv_compact() ? att_acc_chunk(st, i, 1) : att_acc_chunk(st, i, 0);
}

/* Query head j of the group of kv head acc->h at pass row acc->p: normed,
 * rotated, [kv8: Hadamard], requantized into att_q(j); clears its sums. */
static long att_prep_cb(u64 i, void *ctx) {
  const struct att_state *st = ctx;
  u8 *b = att_scratch(st->thread);
  struct qn_acc *acc = acc_of(st->thread);
  u32 j = (u32)i;
  if (!b || !acc || j >= att_group()) return qn_fail(st->thread, __LINE__);
  u32 qh = acc->h * att_group() + j;
  if (qh >= SHAPE.n_heads) return qn_fail(st->thread, __LINE__);
  s64 mx = head_norm_rope(b, acc->p, qh * SHAPE.head_dim, st->qnorm_off, acc->pos);
  if (mx < 0) return qn_fail(st->thread, __LINE__);
  s32 *t1 = att_tmp1(b);
  s32 *q = att_q(b, j);
  s64 *accv = att_acc(b, j);
  if (kv_compact()) { /* keys are stored rotated: rotate the query too (acc is free until below) */
    for (u32 d = 0; d < SHAPE.head_dim; d++) accv[d] = t1[d];
    kv8_hadamard(accv);
    u64 rmx = 0;
    for (u32 d = 0; d < SHAPE.head_dim; d++) rmx = (u64)qn_max64((s64)rmx, (s64)qn_abs64(accv[d]));
    mx = (s64)rmx;
  }
  s32 sq = qn_input_shift((u64)mx, kv_compact() ? QN_KV8_Q_BITS : QN_Q_BITS);
  for (u32 d = 0; d < SHAPE.head_dim; d++) {
    q[d] = (s32)qn_round_shift(kv_compact() ? accv[d] : t1[d], sq);
    accv[d] = 0;
  }
  if (kv_compact() && (j & 1)) { /* second head of a pair: pack the pair's query into its acc */
    const s32 *q0 = att_q(b, j - 1);
    for (u32 d = 0; d < SHAPE.head_dim; d++) accv[d] = (s64)qn_lanes(q0[d], q[d]);
  }
  QN_BARRIER(j); /* checked again: clang keeps j's offset from before the first check */
  if (j >= att_group()) return qn_fail(st->thread, __LINE__);
  struct qn_att_head *hh = &att_heads(b)[j];
  hh->sq = sq;
  hh->lb = kv8_lb();
  hh->voct = 0;
  hh->smax = -2147483647; /* every score is >= this (saturated) */
  hh->sum = 0;
  return 0;
}

/* Output of query head j of the group (after the three passes). */
static long att_out_cb(u64 i, void *ctx) {
  const struct att_state *st = ctx;
  u8 *b = att_scratch(st->thread);
  struct qn_acc *acc = acc_of(st->thread);
  u32 j = (u32)i;
  if (!b || !acc || j >= att_group()) return qn_fail(st->thread, __LINE__);
  u32 o = (acc->h * att_group() + j) * SHAPE.head_dim, p = acc->p;
  s32 *out = buf_lookup(&attn_buf, 0);
  if (!out || p >= QN_PMAX || o > QD_PAD - SHAPE.head_dim) return qn_fail(st->thread, __LINE__);
  out += p * QD_PAD + o;
  s64 *accv = att_acc(b, j);
  if (kv_compact()) { /* the values were stored rotated: rotate the weighted sum back */
    if (!(j & 1) && j + 1 < att_group()) { /* first head of a pair: unpack both sums */
      s64 *acc1 = att_acc(b, j + 1);
      for (u32 d = 0; d < SHAPE.head_dim; d++) {
        u64 t = (u64)accv[d];
        accv[d] = qn_lane_lo(t);
        acc1[d] = qn_lane_hi(t);
      }
    }
    const s64 voct = att_heads(b)[j].voct;
    for (u32 d = 0; d < SHAPE.head_dim; d++) accv[d] = qn_kv8_out_rot(accv[d], voct);
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
  u32 slot = st->slot;
  void *kv = bpf_map_lookup_elem(&kv_outer, &slot);
  if (!kv) return __LINE__;
  u8 *blk = kv_block(kv, st->layer, h, pos);
  if (!blk) return __LINE__;
  u8 *e = kv_rec(blk, pos);
  if (!e) return __LINE__;
  s64 mx = head_norm_rope(b, p, SHAPE.q_dim + h * SHAPE.head_dim, st->knorm_off, pos);
  if (mx < 0) return __LINE__;
  const u32 ko = qn_kv_k_off(), vo = kv_v_off(), km = kv_kmax_off(), vm = kv_vmax_off();
  s32 *t1 = att_tmp1(b);
  s32 *qkv = buf_lookup(&qkv_buf, 0);
  u32 off = SHAPE.q_dim + SHAPE.kv_dim + h * SHAPE.head_dim;
  if (!qkv || p >= QN_PMAX || off > QKV_PAD - SHAPE.head_dim) return __LINE__;
  const s32 *v = qkv + p * QKV_PAD + off;
  if (kv_compact()) { /* rotated in the acc scratch, free until att_prep_cb clears it */
    s64 *x = att_acc(b, 0);
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

/* Item i = (position, kv head), position-major: a kv head's K/V for a
 * position are written before that position's queries attend. The query
 * heads of the kv head's GQA group share each pass over the cached K and V.
 * Flat loops keep the callback nesting, and so the verifier's work, small. */
static long att_item_cb(u64 i, void *ctx) {
  const struct att_state *st = ctx;
  u8 *b = att_scratch(st->thread);
  struct qn_acc *acc = acc_of(st->thread);
  if (!b || !acc || st->nh == 0) return qn_fail(st->thread, __LINE__);
  u32 idx = (u32)i;
  u32 k = idx / st->nh; /* k-th position of this session's slice */
  u32 p = st->pass_off + k;
  u32 h = st->hb + idx % st->nh;
  QN_BARRIER(p);
  QN_BARRIER(h);
  u32 pos = st->pos0 + k;
  if (p >= QN_PMAX || h >= SHAPE.n_kv_heads) return qn_fail(st->thread, __LINE__);
  u32 e = write_kv(st, b, p, pos, h);
  if (e) return qn_fail(st->thread, e);
  acc->p = p;
  acc->pos = pos;
  acc->h = h;
  const u32 g = att_group();
  bpf_loop(g, att_prep_cb, (void *)st, 0);
  if (qn_err(st->thread)) return 1;
  u32 chunks = (pos + ATT_CHUNK) / ATT_CHUNK; /* of the pos + 1 cached positions */
  bpf_loop(chunks, att_score_cb, (void *)st, 0);
  bpf_loop(chunks, att_exp_cb, (void *)st, 0);
  if (kv_compact()) {
    struct qn_att_head *hs = att_heads(b);
    for (u32 j = 0; j < g; j++) hs[j].inv = qn_kv8_prob_inv(hs[j].sum); /* sum >= 2^30: the max's weight */
  }
  u32 acc_chunks = (pos + ATT_ACC_CHUNK) / ATT_ACC_CHUNK; /* the V sums' shorter chunks */
  bpf_loop(acc_chunks, att_acc_cb, (void *)st, 0);
  if (qn_err(st->thread)) return 1;
  bpf_loop(g, att_out_cb, (void *)st, 0);
  return qn_err(st->thread) ? 1 : 0;
}

/* The body, also for a driver program that calls it as a global function. */
static __always_inline int att_main(struct qn_args *a) {
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
  st.c_q24 = qn_attn_scale_q24(SHAPE.head_dim, kv_levels());
  if (st.thread >= SHAPE.threads || st.npos == 0 || st.npos > QN_PMAX || st.pass_off > QN_PMAX - st.npos ||
      a->kv_positions > SHAPE.max_ctx || st.pos0 > a->kv_positions || st.npos > a->kv_positions - st.pos0 ||
      a->head_begin >= a->head_end ||
      a->head_end > SHAPE.n_kv_heads || st.layer >= SHAPE.n_layers || (SHAPE.kv_bytes != 1 && SHAPE.kv_bytes != 2)) {
    a->status = __LINE__;
    return a->status;
  }
  qn_clear_err(st.thread);
  bpf_loop(st.npos * st.nh, att_item_cb, &st, 0);
  a->status = qn_err(st.thread);
  return a->status;
}

SEC("syscall")
int qn_attention(struct qn_args *a) { return att_main(a); }

#endif
