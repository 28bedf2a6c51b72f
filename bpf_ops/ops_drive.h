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
  __uint(max_entries, QN_FAM_COUNT * QN_DRIVE_CPUS); /* key fam * QN_DRIVE_CPUS + CPU slot */
} drive_args SEC(".maps");

/* Each plan link's longest runs (DRIVE_LINKS entries, set at load). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qn_drive_link_time));
  __uint(max_entries, 1);
  __uint(map_flags, BPF_F_MMAPABLE);
} drive_link_time SEC(".maps");

/* When each (family, CPU slot)'s running link started. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, 8);
  __uint(max_entries, QN_FAM_COUNT * QN_DRIVE_CPUS);
} drive_clock SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 16);
} drive_out SEC(".maps");

#include "ops_kdoor.h" /* kernel-started generations: their maps, tokens and end */

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

/* Ends the generation once, whichever chain gets here first: running goes
 * 1 -> 2 (ending: every other chain stops at its next link) -> 0 after the
 * last record. */
static __always_inline int drv_end(struct qn_drive_state *s, u32 why, s32 token) {
  if (__sync_val_compare_and_swap(&s->running, 1, 2) != 1) return 0;
  s->finish = why;
  s->t_end_ns = bpf_ktime_get_ns();
  drv_emit(s, token, why);
  kd_end(s, why, token);
  __sync_lock_test_and_set(&s->running, 0);
  kd_release(s);
  return 0;
}

static __always_inline int drv_fail(struct qn_drive_state *s, u32 i, s32 status) {
  s->status = status ? status : __LINE__;
  s->err_link = i;
  return drv_end(s, QN_FINISH_ERROR, -1);
}

/* Queues family fam's wq of CPU slot `slot` (the wq runs on the CPU that
 * queues it: a chain stays on its CPU). */
static __always_inline int drv_queue(u32 fam, u32 slot) {
  int key = (int)((fam % QN_FAM_COUNT) * QN_DRIVE_CPUS + (slot % QN_DRIVE_CPUS));
  struct qn_drive_wq *w = bpf_map_lookup_elem(&drive_wqs, &key);
  if (!w) return -1;
  return bpf_wq_start(&w->wq, 0);
}

/* Makes link n's operator the current one: its shares become claimable
 * (claim = group end << 32 | next unclaimed link) and this chain goes on
 * with it. */
static __always_inline int drv_publish(struct qn_drive_state *s, u32 n, u32 slot) {
  struct qn_drive_link *l = drv_link_at(n);
  if (!l || l->group_first != n || l->group_end <= n || l->group_end > DRIVE_LINKS) return drv_fail(s, n, __LINE__);
  s->link = n;
  s->done = 0; /* before the claim word: a share of n is counted only after it is claimed */
  __sync_lock_test_and_set(&s->claim, ((u64)l->group_end << 32) | n);
  if (drv_queue(l->family, slot)) return drv_fail(s, n, __LINE__);
  return 0;
}

/* The link after the operator whose shares end at `end`; a pass without
 * logits (prefill) skips the vocabulary and starts the next pass. */
static __always_inline u32 drv_after(struct qn_drive_state *s, u32 end) {
  u32 n = end;
  if (n == DRIVE_VOCAB && s->mask == 0) n = 0;
  if (n >= DRIVE_LINKS) n = 0;
  return n;
}

static __always_inline void drv_note_time(struct qn_drive_state *s, u32 key, u32 link) {
  u64 *t0 = buf_lookup(&drive_clock, key);
  if (!t0) return;
  u64 d = bpf_ktime_get_ns() - *t0;
  __sync_fetch_and_add(&s->busy_ns, d);
  /* No other chain runs this link until its operator is done, which is after
   * this: the entry has one writer at a time. */
  struct qn_drive_link_time *lt = buf_lookup(&drive_link_time, link);
  if (!lt) return;
  if (lt->gen_ns != s->t_start_ns) {
    lt->gen_ns = s->t_start_ns;
    lt->longest_ns = 0;
    lt->second_ns = 0;
  }
  if (d > lt->longest_ns) {
    lt->second_ns = lt->longest_ns;
    lt->longest_ns = d;
  } else if (d > lt->second_ns) {
    lt->second_ns = d;
  }
}

/* ---- the operators of a link; 0 or an error line ---- */
/* A matrix share runs in its chain's CPU slot's scratch (a chain runs one
 * link at a time, so no two shares running at once share scratch); a
 * vocabulary share adds to that slot's top-k lists, which the pass's embed
 * link started empty, and the merge takes every slot's lists. */
/* ops: QN_MM_* (a q4 model's normed ops come in two families by format,
 * QN_FAM_MM4: one program verifying both formats' kernels passes the
 * verifier's budget). */
static __always_inline s32 drv_mm(struct qn_drive_state *s, struct qn_args *a, int cls, u32 slot, int ops) {
  if (a->row_begin >= a->row_end) return 0;
  a->thread = slot;
  a->topk_keep = 1;
  a->npos = s->npos;
  a->pos_mask = s->mask;
  a->top_k = s->sub.vocab_top_k;
  mm_main(a, cls, ops);
  return a->status;
}

/* Every worker slot's top-k lists empty, for the pass's vocabulary shares. */
static __always_inline s32 drv_topk_start(void) {
  for (u32 t = 0; t < QN_DRIVE_CPUS; t++) {
    if (t >= SHAPE.threads) break;
    for (u32 c = 0; c < QN_PMAX; c++) {
      struct qn_topk_slot *k = topk_slot(t, c);
      if (!k) return __LINE__;
      k->argmax_id = -1;
      k->argmax_logit = 0;
      k->count = 0;
    }
  }
  return 0;
}

static __always_inline s32 drv_att(struct qn_drive_state *s, struct qn_args *a) {
  if (a->head_begin >= a->head_end) return 0;
  a->npos = s->npos;
  a->pos0 = s->pass_pos0;
  a->pass_off = 0;
  a->kv_slot = s->sub.kv_slot;
  a->kv_positions = s->sub.kv_positions;
  att_main(a);
  return a->status;
}

/* The pass's tokens: the feed's next QN_PMAX, or the last chosen token. */
static __always_inline s32 drv_embed(struct qn_drive_state *s, struct qn_args *a) {
  u32 n = 1, mask = 1;
  if (s->fed < s->sub.feed_len) {
    s32 *prompt = buf_lookup(&drive_prompt, 0);
    if (!prompt) return __LINE__;
    u32 left = s->sub.feed_len - s->fed;
    n = left < QN_PMAX ? left : QN_PMAX;
    for (u32 k = 0; k < QN_PMAX; k++) {
      if (k >= n) break;
      u32 at = s->fed + k;
      QN_BARRIER(at);
      if (at >= QN_DRIVE_PROMPT_MAX) return __LINE__;
      a->tokens[k] = prompt[at];
    }
    s->fed += n;
    mask = s->fed == s->sub.feed_len ? 1u << ((n - 1) & (QN_PMAX - 1)) : 0;
  } else {
    a->tokens[0] = s->last_token;
  }
  if (n == 0 || n > QN_PMAX || s->pos + n > s->sub.kv_positions) return __LINE__;
  s->pass_pos0 = s->pos;
  s->npos = n;
  s->mask = mask;
  s->pos += n;
  if (mask && drv_topk_start()) return __LINE__;
  a->npos = n;
  emb_main(a);
  return a->status;
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

/* Picks the token as the Sampler would, records it, and says whether the
 * generation goes on (0), ended (-1), or failed (an error line). */
static __always_inline s32 drv_sample(struct qn_drive_state *s, struct qn_args *a) {
  struct qn_topk_slot *m = merged_slot(0);
  if (!m) return __LINE__;
  s32 id = m->argmax_id;
  if (s->sub.mode != QN_DRIVE_ARGMAX) {
    u8 *b = smp_buf();
    if (!b) return __LINE__;
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
        if (!c) return __LINE__;
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
    if (a->status) return a->status;
    id = h->drawn_id;
    if (s->sub.params.flags & QN_SAMPLE_PENALTY) { /* the history grows by the token */
      u32 w = (u32)id >> 5;
      QN_BARRIER(w);
      if (id < 0 || w >= qn_sample_seen_words(SHAPE.vocab)) return __LINE__;
      u32 *seen = (u32 *)(b + qn_sample_seen_off(SHAPE.vocab) + w * 4);
      *seen |= 1u << (id & 31);
    }
  }
  if (id < 0 || (u32)id >= SHAPE.vocab) return __LINE__;
  u32 why = QN_FINISH_NONE;
  if (drv_is_stop(s, id)) why = QN_FINISH_STOP;
  else if (s->generated + 1 >= s->sub.max_tokens) why = QN_FINISH_LENGTH;
  else if (s->pos >= s->sub.kv_positions) why = QN_FINISH_LENGTH; /* no room to feed it */
  s->last_token = id;
  kd_token(s, id);
  if (why == QN_FINISH_NONE && kd_should_pause(s)) { /* the daemon waits: resumed later */
    kd_pause(s, id);
    s->generated++;
    return -1;
  }
  if (why != QN_FINISH_NONE) {
    drv_end(s, why, id);
    s->generated++;
    return -1;
  }
  drv_emit(s, id, 0);
  s->generated++;
  return 0;
}

/* One link of family fam on CPU slot `slot`: claim a share of the current
 * operator (compare-and-swap on the claim word), run it, count it done; the
 * chain that completes the operator publishes the next one. A chain that
 * finds every share of the operator claimed re-queues itself: it waits only
 * for shares a running chain is computing (a link is not preempted), never
 * for a CPU that is not running. */
/* A link is four subprograms (claim, the family's operator, the end of the
 * share), so the link's own frame keeps its few values (state, CPU slot,
 * link, status) in callee-saved registers and needs no stack: the
 * operator's nested loop callbacks need nearly all of BPF's 512 bytes. */

/* Claims a share of the current operator for family fam on CPU slot
 * `slot` (compare-and-swap on the claim word) and returns its link, or -1:
 * none (this chain was re-queued: to wait for the claimed shares, or for the
 * operator's own family). */
static __attribute__((noinline)) s32 drv_claim(struct qn_drive_state *s, u32 fam, u32 slot) {
  if (!s) return -1;
  if (s->cancel) {
    drv_end(s, QN_FINISH_CANCELLED, -1);
    return -1;
  }
  u64 w = s->claim;
  u32 i = (u32)w, ge = (u32)(w >> 32);
  if (i >= ge) { /* every share claimed: wait for them, or for the next operator */
    __sync_fetch_and_add(&s->waits, 1);
    struct qn_drive_link *cur = drv_link_at(ge ? ge - 1 : 0);
    if (!cur || drv_queue(cur->family, slot)) drv_fail(s, ge, __LINE__);
    return -1;
  }
  struct qn_drive_link *l = drv_link_at(i);
  if (!l) {
    drv_fail(s, i, __LINE__);
    return -1;
  }
  if (l->family != fam || __sync_val_compare_and_swap(&s->claim, w, w + 1) != w) {
    /* not this family's turn, or another chain took it: go on there */
    if (drv_queue(l->family, slot)) drv_fail(s, i, __LINE__);
    return -1;
  }
  __sync_fetch_and_add(&s->links_run, 1);
  __sync_fetch_and_add(&s->slot_links[slot % QN_DRIVE_CPUS], 1);
  u64 *t0 = buf_lookup(&drive_clock, fam * QN_DRIVE_CPUS + slot);
  if (t0) *t0 = bpf_ktime_get_ns();
  return (s32)i;
}

/* Link i's argument block: the plan's template in this (family, slot)'s map entry. */
static __always_inline struct qn_args *drv_args(u32 i, u32 fam, u32 slot, u32 *kind) {
  struct qn_drive_link *l = drv_link_at(i);
  struct qn_args *a = buf_lookup(&drive_args, fam * QN_DRIVE_CPUS + slot);
  if (!l || !a) return 0;
  *a = l->a;
  a->status = 0;
  *kind = l->kind;
  return a;
}

static __attribute__((noinline)) s32 drv_op_ctl(struct qn_drive_state *s, u32 i, u32 slot) {
  u32 kind = 0;
  struct qn_args *a = drv_args(i, QN_FAM_CTL, slot, &kind);
  if (!s || !a) return __LINE__;
  if (kind == QN_LINK_EMBED) return drv_embed(s, a);
  if (kind == QN_LINK_MERGE) {
    a->npos = 1;
    a->top_k = s->sub.vocab_top_k;
    merge_main(a);
    return a->status;
  }
  if (kind == QN_LINK_SAMPLE) return drv_sample(s, a);
  return __LINE__;
}
static __attribute__((noinline)) s32 drv_op_att(struct qn_drive_state *s, u32 i, u32 slot) {
  u32 kind = 0;
  struct qn_args *a = drv_args(i, QN_FAM_ATT, slot, &kind);
  if (!s || !a) return __LINE__;
  return drv_att(s, a);
}
static __attribute__((noinline)) s32 drv_op_mm(struct qn_drive_state *s, u32 i, u32 slot) {
  u32 kind = 0;
  struct qn_args *a = drv_args(i, QN_FAM_MM, slot, &kind);
  if (!s || !a) return __LINE__;
  return drv_mm(s, a, QN_MM_NORMED, slot, QN_MM_NO_Q4);
}
static __attribute__((noinline)) s32 drv_op_mm4(struct qn_drive_state *s, u32 i, u32 slot) {
  u32 kind = 0;
  struct qn_args *a = drv_args(i, QN_FAM_MM4, slot, &kind);
  if (!s || !a) return __LINE__;
  return drv_mm(s, a, QN_MM_NORMED, slot, QN_MM_ONLY_Q4);
}
static __attribute__((noinline)) s32 drv_op_vocab(struct qn_drive_state *s, u32 i, u32 slot) {
  u32 kind = 0;
  struct qn_args *a = drv_args(i, QN_FAM_VOCAB, slot, &kind);
  if (!s || !a) return __LINE__;
  return drv_mm(s, a, QN_MM_NORMED, slot, QN_MM_ONLY_Q8A8);
}
static __attribute__((noinline)) s32 drv_op_proj(struct qn_drive_state *s, u32 i, u32 slot) {
  u32 kind = 0;
  struct qn_args *a = drv_args(i, QN_FAM_PROJ, slot, &kind);
  if (!s || !a) return __LINE__;
  return drv_mm(s, a, QN_MM_PROJ, slot, QN_MM_ANY);
}

/* After share i (status e): count it done; the chain that completes the
 * operator publishes the next one, the others go on claiming. */
static __attribute__((noinline)) int drv_done(struct qn_drive_state *s, u32 fam, u32 slot, u32 i, s32 e) {
  if (!s) return 0;
  drv_note_time(s, fam * QN_DRIVE_CPUS + slot, i);
  if (e < 0) return 0; /* the sample link ended the generation */
  if (e) return drv_fail(s, i, e);
  struct qn_drive_link *l = drv_link_at(i);
  if (!l) return drv_fail(s, i, __LINE__);
  const u32 first = l->group_first, end = l->group_end;
  u32 done = __sync_fetch_and_add(&s->done, 1) + 1;
  if (done < end - first) return drv_queue(fam, slot) ? drv_fail(s, i, __LINE__) : 0;
  return drv_publish(s, drv_after(s, end), slot);
}

/* One link of family fam on CPU slot `slot`. A chain that finds every share
 * of the operator claimed re-queues itself: it waits only for shares a
 * running chain is computing (a link is not preempted), never for a CPU that
 * is not running. Every link counts itself active while it may touch the
 * maps: user space waits for running == 0 and then active == 0 before it
 * uses them again, and a link queued before the end finds running != 1 and
 * touches nothing. */
static __always_inline int drv_link(u32 fam, u32 slot) {
  struct qn_drive_state *s = drv_state();
  if (!s) return 0;
  slot %= QN_DRIVE_CPUS;
  __sync_fetch_and_add(&s->active, 1);
  if (s->running == 1) {
    s32 i = drv_claim(s, fam, slot);
    if (i >= 0) {
      s32 e;
      if (fam == QN_FAM_CTL) e = drv_op_ctl(s, (u32)i, slot);
      else if (fam == QN_FAM_ATT) e = drv_op_att(s, (u32)i, slot);
      else if (fam == QN_FAM_PROJ) e = drv_op_proj(s, (u32)i, slot);
      else if (fam == QN_FAM_MM4) e = drv_op_mm4(s, (u32)i, slot);
      else if (fam == QN_FAM_VOCAB) e = drv_op_vocab(s, (u32)i, slot);
      else e = drv_op_mm(s, (u32)i, slot);
      drv_done(s, fam, slot, (u32)i, e);
    }
  }
  __sync_fetch_and_sub(&s->active, 1);
  return 0;
}

static int drv_ctl_cb(void *map, int *key, void *value) { return drv_link(QN_FAM_CTL, key ? (u32)*key : 0); }
static int drv_mm_cb(void *map, int *key, void *value) { return drv_link(QN_FAM_MM, key ? (u32)*key : 0); }
static int drv_proj_cb(void *map, int *key, void *value) { return drv_link(QN_FAM_PROJ, key ? (u32)*key : 0); }
static int drv_att_cb(void *map, int *key, void *value) { return drv_link(QN_FAM_ATT, key ? (u32)*key : 0); }
static int drv_mm4_cb(void *map, int *key, void *value) { return drv_link(QN_FAM_MM4, key ? (u32)*key : 0); }
static int drv_vocab_cb(void *map, int *key, void *value) { return drv_link(QN_FAM_VOCAB, key ? (u32)*key : 0); }

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
SEC("syscall")
int qn_drive_arm_mm4(struct qn_args *a) { return a->status = drv_arm(QN_FAM_MM4, drv_mm4_cb); }
SEC("syscall")
int qn_drive_arm_vocab(struct qn_args *a) { return a->status = drv_arm(QN_FAM_VOCAB, drv_vocab_cb); }

/* Whether a submission can start (0) or the check's line. */
static __always_inline s32 drv_check(const struct qn_drive_submit *sub) {
  if (sub->feed_len == 0 || sub->feed_len > QN_DRIVE_PROMPT_MAX || sub->max_tokens == 0 ||
      sub->n_stop > QN_DRIVE_STOP_MAX || sub->mode > QN_DRIVE_WHOLE || sub->vocab_top_k > QN_TOPK_MAX ||
      sub->list_k > QN_TOPK_MAX || sub->kv_positions > SHAPE.max_ctx || sub->pos > sub->kv_positions ||
      sub->feed_len > sub->kv_positions - sub->pos)
    return __LINE__;
  return 0;
}

/* Starts the checked submission in drive_state.sub: the first link queued on
 * this CPU (the daemon's qn_drive_start and the kernel doorbell). */
static __always_inline void drv_begin(struct qn_drive_state *s) {
  const u32 pos = s->sub.pos;
  s->running = 1;
  s->cancel = 0;
  s->link = 0;
  s->npos = 0;
  s->pass_pos0 = pos;
  s->mask = 0;
  s->pos = pos;
  s->fed = 0;
  s->generated = 0;
  s->last_token = -1;
  s->finish = QN_FINISH_NONE;
  s->status = 0;
  s->err_link = 0;
  s->lost = 0;
  s->links_run = 0;
  s->busy_ns = 0;
  s->waits = 0;
  s->joined = 0;
  for (int c = 0; c < QN_DRIVE_CPUS; c++) s->slot_links[c] = 0;
  s->t_start_ns = bpf_ktime_get_ns();
  s->t_end_ns = 0;
  drv_publish(s, 0, 0);
}

/* Starts a generation: the submission checked and copied into drive_state,
 * the first link queued on this CPU. status: 0, or why not (-16: one is
 * running). The daemon holds the engine (drive_state.owner) meanwhile. */
SEC("syscall")
int qn_drive_start(struct qn_drive_submit *sub) {
  struct qn_drive_state *s = drv_state();
  if (!s) return sub->status = __LINE__;
  if (s->running) return sub->status = -16;
  s32 bad = drv_check(sub);
  if (bad) return sub->status = bad;
  sub->client = 0;
  sub->cpu = bpf_get_smp_processor_id();  /* the first link is queued on this CPU */
  s->sub = *sub;
  drv_begin(s);
  return sub->status = s->finish == QN_FINISH_ERROR ? s->status : 0;
}

/* A second chain joins the running generation on the caller's CPU (CPU
 * slot a->thread, 1..QN_DRIVE_CPUS-1): it claims shares as it gets the CPU.
 * status 0, or 1 when no generation runs (nothing to join). */
SEC("syscall")
int qn_drive_join(struct qn_args *a) {
  struct qn_drive_state *s = drv_state();
  u32 slot = a->thread;
  if (!s || slot == 0 || slot >= QN_DRIVE_CPUS) return a->status = __LINE__;
  if (s->running != 1) return a->status = 1;
  u64 w = s->claim;
  u32 i = (u32)w, ge = (u32)(w >> 32);
  struct qn_drive_link *l = drv_link_at(i < ge ? i : (ge ? ge - 1 : 0));
  if (!l) return a->status = __LINE__;
  __sync_fetch_and_add(&s->joined, 1);
  return a->status = drv_queue(l->family, slot);
}

#include "ops_kdoor_bell.h" /* the doorbell of kernel-started generations */

#endif
