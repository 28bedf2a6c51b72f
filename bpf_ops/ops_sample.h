/* qn_sample: the sampling probabilities of one position, in fixed point
 * (formulas: numerics.h; buffer layout: layout.h, qn_sample_*). User space
 * writes the candidates (the kernel's top-k list or the whole vocabulary,
 * Q16 logits), the parameters and a bitmap of the history's ids into
 * sample_buf; with QN_SAMPLE_LOGITS the candidates are instead the whole
 * vocabulary of a row of logits_buf, where the forward pass left them, and
 * step 1 writes them into cand as it reads them (no copy through user space).
 * The program writes the kept ids with Q40 probabilities:
 *   1. repetition penalty on seen ids, the best logit (first among equals);
 *      greedy stops here with that one id;
 *   2. top-k (k < n): the first k in the order of qn_sample_key (logit
 *      descending, candidate order among equals): for k <= QN_TOPK_MAX the
 *      workers' insertion list (qn_topk_update) in the same pass as 1,
 *      beyond it a radix select of the key (4 passes of 8 bits, each summing
 *      counts per digit); no sort either way;
 *   3. weights 2^-t (Q44) of the top-k set and their sum W; the min-p cut
 *      keeps w >= min_p * 2^44 (the best weighs 2^44); w = 0 is dropped;
 *   4. top-p: in the same order, a candidate is kept while the mass before
 *      it is below ceil(top_p * W): the same radix select, summing weights;
 *   5. the kept weights normalised to Q40 (one reciprocal, then a product each);
 *   6. with QN_SAMPLE_DRAW, the token the seeded draw picks (draw.h): one walk
 *      over the kept entries in candidate order, the same rule as the
 *      Sampler's draw_token in user space.
 * With QN_SAMPLE_LSE (alone, or with QN_SAMPLE_LOGITS) only the
 * log-normalizer of the logprobs the API reports: pass 1 without a penalty or
 * top-k gives the best logit M, one more pass sums the weights at
 * temperature 1 (as in 3.), and lse_q16 = M + ln(S / 2^44) (qn_lse_q16); no
 * cut, nothing written to out.
 * Every loop is a bpf_loop over at most QN_SAMPLE_MAX candidates or 256
 * digits; the state lives in the map header, so each callback is verified once.
 * The C++ model is tests/bpf/fixed_sample.h (by sorting, not radix select).
 */
#ifndef QWEN3_BPF_OPS_SAMPLE_H
#define QWEN3_BPF_OPS_SAMPLE_H

#include "draw.h"
#include "ops_matmul.h" /* qn_topk_update */

#define SMP_COUNT 0  /* radix select over cand, mass 1 each (top-k) */
#define SMP_WEIGHT 1 /* radix select over out, mass w (top-p) */

struct smp_loop {
  u32 level, mode, n;
};

static __always_inline u8 *smp_buf(void) { return buf_lookup(&sample_buf, 0); }
static __always_inline struct qn_topk_entry *smp_cand(u8 *b, u32 i) {
  QN_BARRIER(i);
  if (i >= SHAPE.vocab) return 0;
  return (struct qn_topk_entry *)(b + qn_sample_cand_off() + (u64)i * 8);
}
static __always_inline struct qn_sample_entry *smp_out(u8 *b, u32 j) {
  QN_BARRIER(j);
  if (j >= SHAPE.vocab) return 0;
  return (struct qn_sample_entry *)(b + qn_sample_out_off(SHAPE.vocab) + (u64)j * 16);
}
static __always_inline u64 *smp_hist(u8 *b, u32 g) {
  g &= 255;
  return (u64 *)(b + qn_sample_hist_off() + g * 8);
}
static __always_inline long smp_fail(struct qn_sample_hdr *h, s32 line) {
  if (!h->err) h->err = line;
  return 1;
}

/* Each bpf_loop iteration takes a strip of SMP_STRIP consecutive items: a
 * callback costs an indirect call, more than most items' work. */
#define SMP_STRIP 16
#define SMP_STRIPS(n) (((n) + SMP_STRIP - 1) / SMP_STRIP)
#define SMP_FOR_STRIP(it, n, i)                      \
  for (u32 _u = 0, i = (u32)(it) * SMP_STRIP; _u < SMP_STRIP && i < (n); _u++, i++)

/* 1. penalty and the best candidate (with QN_SAMPLE_LOGITS: cand i filled
 * from the logits row first, lg its start) */
static __always_inline long smp_penalty_one(u8 *b, struct qn_sample_hdr *h, const s32 *lg, u32 i) {
  struct qn_topk_entry *c = smp_cand(b, i);
  if (!c) return smp_fail(h, __LINE__);
  if (lg) {
    u64 k = (u64)h->row * SHAPE.vocab + i;
    QN_BARRIER(k); /* check the final index right before the load */
    if (h->row >= QN_PMAX || k >= (u64)QN_PMAX * SHAPE.vocab) return smp_fail(h, __LINE__);
    c->id = (s32)i;
    c->logit = lg[k];
  }
  s32 id = c->id, l = c->logit;
  if (id < 0 || (u32)id >= SHAPE.vocab) return smp_fail(h, __LINE__);
  if (h->flags & QN_SAMPLE_PENALTY) {
    u32 w = (u32)id >> 5;
    QN_BARRIER(w);
    if (w >= qn_sample_seen_words(SHAPE.vocab)) return smp_fail(h, __LINE__);
    u32 bits = *(u32 *)(b + qn_sample_seen_off(SHAPE.vocab) + w * 4);
    if ((bits >> (id & 31)) & 1) {
      l = qn_rep_penalty(l, h->pm, h->pe);
      c->logit = l;
    }
  }
  if (i == 0 || l > h->best_l) {
    h->best_l = l;
    h->best_i = i;
  }
  if (h->k_list) qn_topk_update((struct qn_topk_slot *)(b + qn_sample_topk_off()), (s32)i, l, h->top_k);
  return 0;
}
static long smp_penalty_cb(u64 it, void *ctx) {
  const struct smp_loop *lp = ctx;
  u8 *b = smp_buf();
  if (!b) return 1;
  struct qn_sample_hdr *h = (void *)b;
  const s32 *lg = 0;
  if (h->flags & QN_SAMPLE_LOGITS) {
    lg = buf_lookup(&logits_buf, 0);
    if (!lg) return smp_fail(h, __LINE__);
  }
  SMP_FOR_STRIP(it, lp->n, i) if (smp_penalty_one(b, h, lg, i)) return 1;
  return 0;
}

/* 2. and 4. one radix-select level: histogram of the next 8 key bits */
static long smp_clear_cb(u64 it, void *ctx) {
  u8 *b = smp_buf();
  if (!b) return 1;
  SMP_FOR_STRIP(it, 256, g) *smp_hist(b, g) = 0;
  return 0;
}
static __always_inline long smp_radix_one(u8 *b, struct qn_sample_hdr *h, const struct smp_loop *lp, u32 i) {
  u64 key, mass;
  if (lp->mode == SMP_COUNT) {
    struct qn_topk_entry *c = smp_cand(b, i);
    if (!c) return smp_fail(h, __LINE__);
    key = qn_sample_key(c->logit);
    mass = 1;
  } else {
    struct qn_sample_entry *e = smp_out(b, i);
    if (!e) return smp_fail(h, __LINE__);
    key = qn_sample_key(e->logit);
    mass = e->w;
  }
  u32 level = lp->level & 3;
  if ((key >> (32 - 8 * level)) != h->prefix) return 0; /* level 0: shift 32, always 0 */
  *smp_hist(b, (u32)(key >> (24 - 8 * level))) += mass;
  return 0;
}
static long smp_radix_cb(u64 it, void *ctx) {
  const struct smp_loop *lp = ctx;
  u8 *b = smp_buf();
  if (!b) return 1;
  struct qn_sample_hdr *h = (void *)b;
  SMP_FOR_STRIP(it, lp->n, i) if (smp_radix_one(b, h, lp, i)) return 1;
  return 0;
}
/* the first digit whose cumulative mass (with all below it) reaches target */
static long smp_scan_cb(u64 it, void *ctx) {
  u8 *b = smp_buf();
  if (!b) return 1;
  struct qn_sample_hdr *h = (void *)b;
  SMP_FOR_STRIP(it, 256, g) {
    u64 m = *smp_hist(b, g);
    if (h->acc + m >= h->target) {
      h->prefix = (h->prefix << 8) | g;
      h->found = 1;
      return 1;
    }
    h->acc += m;
  }
  return 0;
}
/* The smallest key K with mass(key <= K) >= target: h->prefix = K,
 * h->acc = mass(key < K). 0 when the whole mass is below target. */
static __always_inline int smp_select(struct qn_sample_hdr *h, u32 mode, u32 n, u64 target) {
  h->prefix = 0;
  h->acc = 0;
  h->target = target;
#pragma unroll
  for (u32 level = 0; level < 4; level++) {
    struct smp_loop lp = {level, mode, n};
    bpf_loop(SMP_STRIPS(256), smp_clear_cb, &lp, 0);
    bpf_loop(SMP_STRIPS(n), smp_radix_cb, &lp, 0);
    h->found = 0;
    bpf_loop(SMP_STRIPS(256), smp_scan_cb, &lp, 0);
    if (h->err) return -1;
    if (!h->found) { /* at level 0: the whole mass is below target; deeper, the chosen digit holds it */
      if (level == 0) return 0;
      smp_fail(h, __LINE__);
      return -1;
    }
  }
  return 1;
}

/* The Q44 weight of logit l at the header's temperature factor, relative to the best. */
static __always_inline u64 smp_weight(const struct qn_sample_hdr *h, s32 l) {
  u64 t = qn_sample_octaves((u64)((s64)h->best_l - (s64)l), h->cm, h->csh);
  if ((t >> 32) >= QN_SAMPLE_W_ZERO) return 0; /* weighs 0: skip the exponential */
  return qn_exp2_neg_q44(t);
}

/* 3. weights of the top-k set, min-p, compaction into out (candidate order) */
static __always_inline long smp_weight_one(u8 *b, struct qn_sample_hdr *h, u32 i) {
  struct qn_topk_entry *c = smp_cand(b, i);
  if (!c) return smp_fail(h, __LINE__);
  s32 l = c->logit;
  u64 key = qn_sample_key(l);
  if (h->k_on) {
    if (key > h->k_key) return 0;
    if (key == h->k_key) {
      u64 before = h->k_acc + h->tie_run;
      h->tie_run += 1;
      if (before >= h->k_target) return 0;
    }
  }
  u64 w = smp_weight(h, l);
  h->W += w;
  if (w == 0 || w < h->min_p_q44) return 0;
  struct qn_sample_entry *e = smp_out(b, h->m);
  if (!e) return smp_fail(h, __LINE__);
  e->id = c->id;
  e->logit = l;
  e->w = w;
  h->m += 1;
  return 0;
}
static long smp_weight_cb(u64 it, void *ctx) {
  const struct smp_loop *lp = ctx;
  u8 *b = smp_buf();
  if (!b) return 1;
  struct qn_sample_hdr *h = (void *)b;
  SMP_FOR_STRIP(it, lp->n, i) if (smp_weight_one(b, h, i)) return 1;
  return 0;
}

/* 4. the top-p cut, compacting out in place (kept <= j) */
static __always_inline long smp_keep_one(u8 *b, struct qn_sample_hdr *h, u32 j) {
  struct qn_sample_entry *e = smp_out(b, j);
  if (!e) return smp_fail(h, __LINE__);
  struct qn_sample_entry v = *e;
  if (h->p_on) {
    u64 key = qn_sample_key(v.logit);
    if (key > h->p_key) return 0;
    if (key == h->p_key) {
      u64 before = h->p_acc + h->tie_run;
      h->tie_run += v.w;
      if (before >= h->p_target) return 0;
    }
  }
  struct qn_sample_entry *o = smp_out(b, h->kept);
  if (!o) return smp_fail(h, __LINE__);
  *o = v;
  h->Wk += v.w;
  h->kept += 1;
  return 0;
}
static long smp_keep_cb(u64 it, void *ctx) {
  const struct smp_loop *lp = ctx;
  u8 *b = smp_buf();
  if (!b) return 1;
  struct qn_sample_hdr *h = (void *)b;
  SMP_FOR_STRIP(it, lp->n, j) if (smp_keep_one(b, h, j)) return 1;
  return 0;
}

/* 5. weights -> Q40 probabilities */
static long smp_norm_cb(u64 it, void *ctx) {
  const struct smp_loop *lp = ctx;
  u8 *b = smp_buf();
  if (!b) return 1;
  struct qn_sample_hdr *h = (void *)b;
  s32 s = h->s;
  u64 d = h->d;
  if (s < 13 || s > 40) return smp_fail(h, __LINE__);
  SMP_FOR_STRIP(it, lp->n, j) {
    struct qn_sample_entry *e = smp_out(b, j);
    if (!e) return smp_fail(h, __LINE__);
    e->w = qn_sample_prob_q40(e->w, d, s);
    h->Pk += e->w;
  }
  return 0;
}

/* 6. the seeded draw: the first kept entry whose cumulative mass exceeds r */
static long smp_draw_cb(u64 it, void *ctx) {
  const struct smp_loop *lp = ctx;
  u8 *b = smp_buf();
  if (!b) return 1;
  struct qn_sample_hdr *h = (void *)b;
  SMP_FOR_STRIP(it, lp->n, j) {
    struct qn_sample_entry *e = smp_out(b, j);
    if (!e) return smp_fail(h, __LINE__);
    h->draw_acc += e->w;
    if (h->draw_r < h->draw_acc) {
      h->drawn_id = e->id;
      h->drawn_i = j;
      return 1;
    }
  }
  return 0;
}
static __always_inline s32 smp_draw(struct qn_sample_hdr *h) {
  const u32 kept = h->kept;
  if (kept == 0 || kept > SHAPE.vocab || h->Pk == 0) return __LINE__;
  h->draw_bits = qn_draw_bits(h->seed, h->draw_index);
  h->draw_r = qn_draw_point(h->draw_bits, h->Pk);
  h->draw_acc = 0;
  struct smp_loop lp = {0, 0, kept};
  bpf_loop(SMP_STRIPS(kept), smp_draw_cb, &lp, 0);
  if (h->err) return h->err;
  return h->drawn_id < 0 ? __LINE__ : 0; /* r < Pk: the walk always ends on an entry */
}

/* QN_SAMPLE_LSE: the sum of every candidate's weight at temperature 1 */
static __always_inline long smp_lse_one(u8 *b, struct qn_sample_hdr *h, u32 i) {
  struct qn_topk_entry *c = smp_cand(b, i);
  if (!c) return smp_fail(h, __LINE__);
  h->W += smp_weight(h, c->logit);
  return 0;
}
static long smp_lse_cb(u64 it, void *ctx) {
  const struct smp_loop *lp = ctx;
  u8 *b = smp_buf();
  if (!b) return 1;
  struct qn_sample_hdr *h = (void *)b;
  SMP_FOR_STRIP(it, lp->n, i) if (smp_lse_one(b, h, i)) return 1;
  return 0;
}
static __always_inline s32 smp_lse(struct qn_sample_hdr *h, u8 *b, u32 n) {
  if ((h->flags & ~QN_SAMPLE_LOGITS) != QN_SAMPLE_LSE) return __LINE__; /* no penalty, no greedy: the model's own distribution */
  h->err = 0;
  h->kept = 0;
  h->best_l = 0;
  h->best_i = 0;
  h->k_list = 0;
  struct smp_loop lp = {0, 0, n};
  bpf_loop(SMP_STRIPS(n), smp_penalty_cb, &lp, 0); /* the best logit (and the ids checked) */
  if (h->err) return h->err;
  int csh = 0;
  h->cm = qn_lse_factor(&csh);
  h->csh = csh;
  h->W = 0;
  bpf_loop(SMP_STRIPS(n), smp_lse_cb, &lp, 0);
  if (h->err) return h->err;
  if (h->W < (1ULL << QN_SAMPLE_WFRAC)) return __LINE__; /* the best weighs 2^44 */
  h->lse_q16 = qn_lse_q16(h->best_l, h->W);
  return 0;
}

static __always_inline s32 smp_run(struct qn_sample_hdr *h, u8 *b) {
  const u32 n = h->n;
  if (n == 0 || n > SHAPE.vocab || n > QN_SAMPLE_MAX) return __LINE__;
  if ((h->flags & QN_SAMPLE_LOGITS) && (n != SHAPE.vocab || h->row >= QN_PMAX)) return __LINE__;
  if (h->flags & QN_SAMPLE_LSE) return smp_lse(h, b, n);
  const int greedy = (h->flags & QN_SAMPLE_GREEDY) != 0;
  if ((h->flags & QN_SAMPLE_PENALTY) && (h->pm < (1u << 23) || h->pm >= (1u << 24) || h->pe > 32))
    return __LINE__;
  if (!greedy && (h->tm < (1u << 31) || h->te < -16 || h->te > 46 || h->min_p_q44 >= (1ULL << 44) ||
                  h->top_p_q32 == 0 || h->top_p_q32 > (1ULL << 32)))
    return __LINE__;
  h->err = 0;
  h->kept = 0;
  h->best_l = 0;
  h->best_i = 0;
  h->k_on = 0;
  h->k_list = !greedy && h->top_k > 0 && h->top_k < n && h->top_k <= QN_TOPK_MAX;
  if (h->k_list) {
    struct qn_topk_slot *t = (struct qn_topk_slot *)(b + qn_sample_topk_off());
    t->argmax_id = -1;
    t->count = 0;
  }
  struct smp_loop lp = {0, 0, n};
  bpf_loop(SMP_STRIPS(n), smp_penalty_cb, &lp, 0);
  if (h->err) return h->err;
  if (greedy) {
    struct qn_topk_entry *c = smp_cand(b, h->best_i);
    struct qn_sample_entry *o = smp_out(b, 0);
    if (!c || !o) return __LINE__;
    o->id = c->id;
    o->logit = h->best_l;
    o->w = 1ULL << QN_SAMPLE_PFRAC;
    h->Pk = o->w;
    h->kept = 1;
    return 0;
  }
  int csh = 0;
  h->cm = qn_temp_factor(h->tm, h->te, &csh);
  h->csh = csh;

  if (h->k_list) { /* the k-th of the list and how many are strictly above it */
    struct qn_topk_slot *t = (struct qn_topk_slot *)(b + qn_sample_topk_off());
    u32 k = h->top_k;
    if (k == 0 || k > QN_TOPK_MAX || t->count != (s32)k) return __LINE__;
    s32 kth = t->e[(k - 1) & (QN_TOPK_MAX - 1)].logit;
    u64 above = 0;
    for (u32 j = 0; j < QN_TOPK_MAX; j++) {
      if (j >= k) break;
      above += t->e[j].logit > kth;
    }
    h->k_on = 1;
    h->k_key = qn_sample_key(kth);
    h->k_acc = above;
    h->k_target = k;
  } else if (h->top_k > 0 && h->top_k < n) {
    int r = smp_select(h, SMP_COUNT, n, h->top_k);
    if (r < 0) return h->err;
    h->k_on = r > 0; /* always: n > k */
    h->k_key = h->prefix;
    h->k_acc = h->acc;
    h->k_target = h->top_k;
  }
  h->W = 0;
  h->m = 0;
  h->tie_run = 0;
  bpf_loop(SMP_STRIPS(n), smp_weight_cb, &lp, 0);
  if (h->err) return h->err;
  const u32 m = h->m;
  if (m == 0 || m > n) return __LINE__; /* the best always weighs 2^44 */

  h->p_on = 0;
  if (h->top_p_q32 < (1ULL << 32)) {
    u64 target = qn_top_p_target(h->W, h->top_p_q32);
    int r = smp_select(h, SMP_WEIGHT, m, target);
    if (r < 0) return h->err;
    h->p_on = r > 0;
    h->p_key = h->prefix;
    h->p_acc = h->acc;
    h->p_target = target;
  }
  h->Wk = 0;
  h->tie_run = 0;
  lp.n = m;
  bpf_loop(SMP_STRIPS(m), smp_keep_cb, &lp, 0);
  if (h->err) return h->err;
  const u32 kept = h->kept;
  if (kept == 0 || kept > m || h->Wk < (1ULL << QN_SAMPLE_WFRAC)) return __LINE__;
  h->s = qn_prob_shift(h->Wk);
  h->d = qn_prob_recip(h->Wk >> h->s);
  h->Pk = 0;
  lp.n = kept;
  bpf_loop(SMP_STRIPS(kept), smp_norm_cb, &lp, 0);
  return h->err;
}

/* The body, also for a driver program that calls it as a global function. */
static __always_inline int smp_main(struct qn_args *a) {
  u8 *b = smp_buf();
  if (!b) {
    a->status = __LINE__;
    return a->status;
  }
  struct qn_sample_hdr *h = (void *)b;
  h->drawn_id = -1;
  s32 e = smp_run(h, b);
  if (!e && (h->flags & QN_SAMPLE_DRAW)) e = smp_draw(h);
  if (e) h->kept = 0;
  a->status = e;
  return e;
}

SEC("syscall")
int qn_sample(struct qn_args *a) { return smp_main(a); }

#endif
