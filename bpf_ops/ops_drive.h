/* The kernel driver (docs/kernel-driver.md; interface: drive_abi.h): a whole
 * generation as a chain of bpf_wq links, no bpf() call per token. Each link
 * runs one operator share of the plan (drive_plan) with the operator bodies
 * of ops_*.h, then starts the wq of the next link's family. A family is one
 * program (qn_drive_arm_<family> sets its wqs' callback), so each stays within
 * the verifier's budget: the chain alternates between four verified programs.
 * The wq runs in a kworker of the CPU that queued it; the worker yields
 * between links, so no uninterrupted kernel run is longer than one operator
 * share (bounded; the scheduler and the lockup detectors see the CPU change
 * hands). The sample link picks the token exactly as the user driver's
 * Sampler does (the same candidates, qn_sample with the seeded draw at index
 * draw0 + tokens chosen), appends a record to drive_out and ends the chain at
 * a stop id, max_tokens or the context's end.
 */
#ifndef QWEN3_BPF_OPS_DRIVE_H
#define QWEN3_BPF_OPS_DRIVE_H

#include "drive_abi.h"
#include "ops_attention.h"
#include "ops_embed.h"
#include "ops_sample.h"
#include "ops_topk.h"

/* Debian 12's uapi headers predate bpf_wq (Linux 6.10); the uapi layout. */
struct bpf_wq {
  __u64 __opaque[2];
} __attribute__((aligned(8)));
extern int bpf_wq_init(struct bpf_wq *wq, void *p__map, unsigned int flags) __ksym;
extern int bpf_wq_start(struct bpf_wq *wq, unsigned int flags) __ksym;
extern int bpf_wq_set_callback_impl(struct bpf_wq *wq, int (callback_fn)(void *map, int *key, void *value),
                                    unsigned int flags, void *aux__ign) __ksym;

/* Links of the plan and the vocabulary's first link (set at load). */
const volatile u32 DRIVE_LINKS = 1, DRIVE_VOCAB = 0;

struct qn_drive_wq {
  struct bpf_wq wq;
};
/* key fam * QN_DRIVE_CPUS + CPU slot */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, QN_FAM_COUNT * QN_DRIVE_CPUS);
  __type(key, int);
  __type(value, struct qn_drive_wq);
} drive_wqs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qn_drive_link));
  __uint(max_entries, 1); /* DRIVE_LINKS, set at load */
  __uint(map_flags, BPF_F_MMAPABLE);
} drive_plan SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qn_drive_state));
  __uint(max_entries, 1);
  __uint(map_flags, BPF_F_MMAPABLE);
} drive_state SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, 4 * QN_DRIVE_PROMPT_MAX);
  __uint(max_entries, 1);
  __uint(map_flags, BPF_F_MMAPABLE);
} drive_prompt SEC(".maps");

/* A link's argument block: in map memory (the stack of a callback calling an
 * operator is too small for it), one per family. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qn_args));
  __uint(max_entries, QN_FAM_COUNT);
} drive_args SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 16);
} drive_out SEC(".maps");

static __always_inline struct qn_drive_state *drv_state(void) { return buf_lookup(&drive_state, 0); }
static __always_inline struct qn_drive_link *drv_link_at(u32 i) { return buf_lookup(&drive_plan, i); }

static __always_inline void drv_emit(struct qn_drive_state *s, s32 token, u32 finish) {
  struct qn_drive_record *r = bpf_ringbuf_reserve(&drive_out, sizeof(*r), 0);
  if (!r) {
    s->lost++;
    return;
  }
  r->tag = s->sub.tag;
  r->index = s->generated;
  r->token = token;
  r->finish = finish;
  r->status = s->status;
  r->pos = s->pos;
  bpf_ringbuf_submit(r, 0);
}

static __always_inline int drv_end(struct qn_drive_state *s, u32 why, s32 token) {
  s->finish = why;
  s->t_end_ns = bpf_ktime_get_ns();
  drv_emit(s, token, why);
  s->running = 0;
  return 0;
}

/* Starts link i: the wq of its family on this chain's CPU slot. */
static __always_inline int drv_go(struct qn_drive_state *s, u32 i) {
  struct qn_drive_link *l = drv_link_at(i);
  if (!l || l->family >= QN_FAM_COUNT) {
    s->status = __LINE__;
    s->err_link = i;
    return drv_end(s, QN_FINISH_ERROR, -1);
  }
  s->link = i;
  int key = (int)(l->family * QN_DRIVE_CPUS);
  struct qn_drive_wq *w = bpf_map_lookup_elem(&drive_wqs, &key);
  if (!w || bpf_wq_start(&w->wq, 0)) {
    s->status = __LINE__;
    s->err_link = i;
    return drv_end(s, QN_FINISH_ERROR, -1);
  }
  return 0;
}

/* After link i: the next one; a pass without logits (prefill) skips the
 * vocabulary and starts the next pass. */
static __always_inline int drv_next(struct qn_drive_state *s, u32 i) {
  u32 n = i + 1;
  if (n == DRIVE_VOCAB && s->mask == 0) n = 0;
  if (n >= DRIVE_LINKS) n = 0;
  return drv_go(s, n);
}

static __always_inline int drv_fail(struct qn_drive_state *s, u32 i, s32 status) {
  s->status = status ? status : __LINE__;
  s->err_link = i;
  return drv_end(s, QN_FINISH_ERROR, -1);
}

/* Common head of every link: the state, the cancel check, the link's plan
 * entry copied into this family's argument block. 0: nothing to run. */
static __always_inline struct qn_args *drv_begin(int fam, struct qn_drive_state **sp, u32 *ip, u32 *kind) {
  struct qn_drive_state *s = drv_state();
  if (!s || !s->running) return 0;
  *sp = s;
  u64 now = bpf_ktime_get_ns();
  s->links_run++;
  if (s->cancel) {
    drv_end(s, QN_FINISH_CANCELLED, -1);
    return 0;
  }
  u32 i = s->link;
  *ip = i;
  struct qn_drive_link *l = drv_link_at(i);
  struct qn_args *a = buf_lookup(&drive_args, (u32)fam);
  if (!l || !a || l->family != (u32)fam) {
    drv_fail(s, i, __LINE__);
    return 0;
  }
  *a = l->a;
  a->status = 0;
  *kind = l->kind;
  (void)now;
  return a;
}

static __always_inline void drv_note_time(struct qn_drive_state *s, u64 t0) {
  u64 d = bpf_ktime_get_ns() - t0;
  if (d > s->max_link_ns) s->max_link_ns = d;
  s->busy_ns += d;
}

/* ---- the matmul families ---- */
static __always_inline int drv_mm_link(int fam, int cls) {
  struct qn_drive_state *s = 0;
  u32 i = 0, kind = 0;
  u64 t0 = bpf_ktime_get_ns();
  struct qn_args *a = drv_begin(fam, &s, &i, &kind);
  if (!a || !s) return 0;
  a->npos = s->npos;
  a->pos_mask = s->mask;
  a->top_k = s->sub.vocab_top_k;
  if (a->row_begin < a->row_end) {
    mm_main(a, cls);
    if (a->status) return drv_fail(s, i, a->status);
  } else if (cls == QN_MM_NORMED && a->op == QN_OP_VOCAB) {
    /* no rows: an empty list for the merge, not the last pass's */
    for (u32 c = 0; c < QN_PMAX; c++) {
      struct qn_topk_slot *t = topk_slot(a->thread, c);
      if (!t) return drv_fail(s, i, __LINE__);
      t->argmax_id = -1;
      t->argmax_logit = 0;
      t->count = 0;
    }
  }
  drv_note_time(s, t0);
  return drv_next(s, i);
}
static int drv_mm_cb(void *map, int *key, void *value) { return drv_mm_link(QN_FAM_MM, QN_MM_NORMED); }
static int drv_proj_cb(void *map, int *key, void *value) { return drv_mm_link(QN_FAM_PROJ, QN_MM_PROJ); }

/* ---- attention ---- */
static int drv_att_cb(void *map, int *key, void *value) {
  struct qn_drive_state *s = 0;
  u32 i = 0, kind = 0;
  u64 t0 = bpf_ktime_get_ns();
  struct qn_args *a = drv_begin(QN_FAM_ATT, &s, &i, &kind);
  if (!a || !s) return 0;
  if (a->head_begin < a->head_end) {
    a->npos = s->npos;
    a->pos0 = s->pass_pos0;
    a->pass_off = 0;
    a->kv_slot = s->sub.kv_slot;
    a->kv_positions = s->sub.kv_positions;
    att_main(a);
    if (a->status) return drv_fail(s, i, a->status);
  }
  drv_note_time(s, t0);
  return drv_next(s, i);
}

/* ---- control: embed (the pass's tokens), merge, sample ---- */
static __always_inline int drv_embed(struct qn_drive_state *s, struct qn_args *a, u32 i) {
  u32 n = 1, mask = 1;
  if (s->fed < s->sub.feed_len) {
    s32 *prompt = buf_lookup(&drive_prompt, 0);
    if (!prompt) return drv_fail(s, i, __LINE__);
    u32 left = s->sub.feed_len - s->fed;
    n = left < QN_PMAX ? left : QN_PMAX;
    for (u32 k = 0; k < QN_PMAX; k++) {
      if (k >= n) break;
      u32 at = s->fed + k;
      QN_BARRIER(at);
      if (at >= QN_DRIVE_PROMPT_MAX) return drv_fail(s, i, __LINE__);
      a->tokens[k] = prompt[at];
    }
    s->fed += n;
    mask = s->fed == s->sub.feed_len ? 1u << ((n - 1) & (QN_PMAX - 1)) : 0;
  } else {
    a->tokens[0] = s->last_token;
  }
  if (n == 0 || n > QN_PMAX || s->pos + n > s->sub.kv_positions) return drv_fail(s, i, __LINE__);
  s->pass_pos0 = s->pos;
  s->npos = n;
  s->mask = mask;
  s->pos += n;
  a->npos = n;
  emb_main(a);
  if (a->status) return drv_fail(s, i, a->status);
  return drv_next(s, i);
}

/* The whole vocabulary's logits of the pass's logit row 0, in id order, as
 * qn_sample's candidates: from logits_buf to sample_buf in the kernel. */
struct drv_copy {
  u32 n;
};
static long drv_copy_cb(u64 it, void *ctx) {
  const struct drv_copy *cp = ctx;
  u8 *b = smp_buf();
  s32 *lg = buf_lookup(&logits_buf, 0);
  if (!b || !lg) return 1;
  SMP_FOR_STRIP(it, cp->n, j) {
    struct qn_topk_entry *c = smp_cand(b, j);
    u32 jj = j;
    QN_BARRIER(jj); /* check the final index right before the load */
    if (!c || jj >= SHAPE.vocab) return 1;
    c->id = (s32)jj;
    c->logit = lg[jj];
  }
  return 0;
}

static __always_inline int drv_is_stop(struct qn_drive_state *s, s32 id) {
  u32 n = s->sub.n_stop;
  for (u32 j = 0; j < QN_DRIVE_STOP_MAX; j++) {
    if (j >= n) break;
    if (s->sub.stop_ids[j] == id) return 1;
  }
  return 0;
}

static __always_inline int drv_sample(struct qn_drive_state *s, struct qn_args *a, u32 i) {
  struct qn_topk_slot *m = merged_slot(0);
  if (!m) return drv_fail(s, i, __LINE__);
  s32 id = m->argmax_id;
  if (s->sub.mode != QN_DRIVE_ARGMAX) {
    u8 *b = smp_buf();
    if (!b) return drv_fail(s, i, __LINE__);
    struct qn_sample_hdr *h = (void *)b;
    u32 n = 0;
    if (s->sub.mode == QN_DRIVE_LIST) {
      s32 cnt = m->count;
      n = s->sub.list_k;
      if (cnt < 0) cnt = 0;
      if ((u32)cnt < n) n = (u32)cnt;
      for (u32 j = 0; j < QN_TOPK_MAX; j++) {
        if (j >= n) break;
        struct qn_topk_entry *c = smp_cand(b, j);
        if (!c) return drv_fail(s, i, __LINE__);
        c->id = m->e[j].id;
        c->logit = m->e[j].logit;
      }
    } else {
      n = SHAPE.vocab;
      struct drv_copy cp = {n};
      bpf_loop(SMP_STRIPS(n), drv_copy_cb, &cp, 0);
    }
    h->n = n;
    h->top_k = s->sub.params.top_k;
    h->flags = s->sub.params.flags | QN_SAMPLE_DRAW;
    h->tm = s->sub.params.tm;
    h->te = s->sub.params.te;
    h->pm = s->sub.params.pm;
    h->pe = s->sub.params.pe;
    h->min_p_q44 = s->sub.params.min_p_q44;
    h->top_p_q32 = s->sub.params.top_p_q32;
    h->seed = s->sub.params.seed;
    h->draw_index = s->sub.draw0 + s->generated;
    smp_main(a);
    if (a->status) return drv_fail(s, i, a->status);
    id = h->drawn_id;
    if (s->sub.params.flags & QN_SAMPLE_PENALTY) { /* the history grows by the token */
      u32 w = (u32)id >> 5;
      QN_BARRIER(w);
      if (id < 0 || w >= qn_sample_seen_words(SHAPE.vocab)) return drv_fail(s, i, __LINE__);
      u32 *seen = (u32 *)(b + qn_sample_seen_off(SHAPE.vocab) + w * 4);
      *seen |= 1u << (id & 31);
    }
  }
  if (id < 0 || (u32)id >= SHAPE.vocab) return drv_fail(s, i, __LINE__);
  u32 why = QN_FINISH_NONE;
  if (drv_is_stop(s, id)) why = QN_FINISH_STOP;
  else if (s->generated + 1 >= s->sub.max_tokens) why = QN_FINISH_LENGTH;
  else if (s->pos >= s->sub.kv_positions) why = QN_FINISH_LENGTH; /* no room to feed it */
  s->last_token = id;
  if (why != QN_FINISH_NONE) {
    drv_end(s, why, id);
    s->generated++;
    return 0;
  }
  drv_emit(s, id, 0);
  s->generated++;
  return drv_go(s, 0);
}

static int drv_ctl_cb(void *map, int *key, void *value) {
  struct qn_drive_state *s = 0;
  u32 i = 0, kind = 0;
  u64 t0 = bpf_ktime_get_ns();
  struct qn_args *a = drv_begin(QN_FAM_CTL, &s, &i, &kind);
  if (!a || !s) return 0;
  int r = 0;
  if (kind == QN_LINK_EMBED) {
    r = drv_embed(s, a, i);
  } else if (kind == QN_LINK_MERGE) {
    a->npos = 1;
    a->top_k = s->sub.vocab_top_k;
    merge_main(a);
    if (a->status) return drv_fail(s, i, a->status);
    r = drv_next(s, i);
  } else if (kind == QN_LINK_SAMPLE) {
    r = drv_sample(s, a, i);
  } else {
    return drv_fail(s, i, __LINE__);
  }
  drv_note_time(s, t0);
  return r;
}

/* Sets the callback of family fam's wqs (every CPU slot); run once at load. */
static __always_inline int drv_arm(int fam, int (*cb)(void *, int *, void *)) {
  for (int c = 0; c < QN_DRIVE_CPUS; c++) {
    int key = fam * QN_DRIVE_CPUS + c;
    struct qn_drive_wq *w = bpf_map_lookup_elem(&drive_wqs, &key);
    if (!w) return __LINE__;
    int err = bpf_wq_init(&w->wq, &drive_wqs, 0);
    if (err) return err;
    err = bpf_wq_set_callback_impl(&w->wq, cb, 0, 0);
    if (err) return err;
  }
  return 0;
}

SEC("syscall")
int qn_drive_arm_ctl(struct qn_args *a) { return a->status = drv_arm(QN_FAM_CTL, drv_ctl_cb); }
SEC("syscall")
int qn_drive_arm_mm(struct qn_args *a) { return a->status = drv_arm(QN_FAM_MM, drv_mm_cb); }
SEC("syscall")
int qn_drive_arm_proj(struct qn_args *a) { return a->status = drv_arm(QN_FAM_PROJ, drv_proj_cb); }
SEC("syscall")
int qn_drive_arm_att(struct qn_args *a) { return a->status = drv_arm(QN_FAM_ATT, drv_att_cb); }

/* Starts a generation: the submission checked and copied into drive_state,
 * the first link queued on this CPU. status: 0, or why not (-16: one is
 * running). */
SEC("syscall")
int qn_drive_start(struct qn_drive_submit *sub) {
  struct qn_drive_state *s = drv_state();
  if (!s) return sub->status = __LINE__;
  if (s->running) return sub->status = -16;
  if (sub->feed_len == 0 || sub->feed_len > QN_DRIVE_PROMPT_MAX || sub->max_tokens == 0 ||
      sub->n_stop > QN_DRIVE_STOP_MAX || sub->mode > QN_DRIVE_WHOLE || sub->vocab_top_k > QN_TOPK_MAX ||
      sub->list_k > QN_TOPK_MAX || sub->kv_positions > SHAPE.max_ctx || sub->pos > sub->kv_positions ||
      sub->feed_len > sub->kv_positions - sub->pos)
    return sub->status = __LINE__;
  s->sub = *sub;
  s->running = 1;
  s->cancel = 0;
  s->link = 0;
  s->npos = 0;
  s->pass_pos0 = sub->pos;
  s->mask = 0;
  s->pos = sub->pos;
  s->fed = 0;
  s->generated = 0;
  s->last_token = -1;
  s->finish = QN_FINISH_NONE;
  s->status = 0;
  s->err_link = 0;
  s->lost = 0;
  s->links_run = 0;
  s->max_link_ns = 0;
  s->busy_ns = 0;
  s->t_start_ns = bpf_ktime_get_ns();
  s->t_end_ns = 0;
  drv_go(s, 0);
  return sub->status = s->finish == QN_FINISH_ERROR ? s->status : 0;
}

#endif
