/* The doorbell of kernel-started generations (docs/kernel-driver.md,
 * "Kernel-started generations"): kd_bell's wq callback, set once at load by
 * qn_kdoor_arm. A BPF client rings it (bpf_wq_start) after marking its
 * request ready; the callback takes the engine (drive_state.owner 0 -> 2 by
 * compare-and-swap; held: a 1 ms timer rings again), takes the oldest ready
 * request, maps its bytes to token ids in BPF (kd_state.byte_ids: Qwen3's
 * byte-level base tokens), finds or takes its session in the kernel pool,
 * resets the session's result slot and starts the driver's chain exactly as
 * qn_drive_start does. No user-space step anywhere. Included at the end of
 * ops_drive.h.
 */
#ifndef QWEN3_BPF_OPS_KDOOR_BELL_H
#define QWEN3_BPF_OPS_KDOOR_BELL_H

static __always_inline void kd_retry_later(void) {
  int zero = 0;
  struct qn_kd_timer *t = bpf_map_lookup_elem(&kd_retry, &zero);
  if (t) bpf_timer_start(&t->timer, 1000000 /* 1 ms */, 0);
}

static __always_inline int kd_same_session(const char *a, const char *b) {
  const u64 *x = (const u64 *)a, *y = (const u64 *)b;
  return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

/* The request's session in the kernel pool: its own entry, or a free one
 * taken (compare-and-swap); -1 when all are taken by other sessions. */
static __always_inline s32 kd_session_of(const char *name) {
  for (u32 i = 0; i < QK_KD_SESSIONS; i++) {
    struct qk_kd_session *ss = buf_lookup(&kd_sessions, i);
    if (ss && ss->state && kd_same_session(ss->session, name)) return (s32)i;
  }
  for (u32 i = 0; i < QK_KD_SESSIONS; i++) {
    struct qk_kd_session *ss = buf_lookup(&kd_sessions, i);
    if (!ss || ss->kv_capacity == 0) continue; /* no KV reserved for it */
    if (__sync_val_compare_and_swap(&ss->state, 0, 1) != 0) continue;
    __builtin_memcpy(ss->session, name, QK_SESSION_BYTES);
    ss->positions = 0;
    ss->pending_token = -1;
    return (s32)i;
  }
  return -1;
}

/* The prompt as ids into drive_prompt[n0..]: bytes through the byte table, or
 * the client's ids (checked against the vocabulary). */
struct kd_feed {
  u32 req;  /* kd_requests key */
  u32 n0;   /* ids already in drive_prompt (the pending token) */
  u32 text; /* QK_F_TEXT */
  u32 len;  /* prompt_len */
  u32 bad;  /* an id outside the vocabulary */
};
static long kd_feed_cb(u64 i, void *ctx) {
  struct kd_feed *f = ctx;
  struct qk_kd_request *q = buf_lookup(&kd_requests, f->req);
  struct qk_kd_state *ks = kd_st();
  s32 *prompt = buf_lookup(&drive_prompt, 0);
  if (!q || !ks || !prompt || i >= f->len) return 1;
  s32 id;
  if (f->text) {
    __u8 b = q->g.prompt[i & (QK_MAX_PROMPT_BYTES - 1)];
    id = ks->byte_ids[b];
  } else {
    u32 at = (u32)(i & (QK_MAX_PROMPT_BYTES / 4 - 1)) * 4;
    __builtin_memcpy(&id, &q->g.prompt[at], 4);
  }
  if (id < 0 || (u32)id >= ks->vocab || (u32)id >= SHAPE.vocab) {
    f->bad = 1;
    return 1;
  }
  prompt[(f->n0 + i) & (QN_DRIVE_PROMPT_MAX - 1)] = id;
  return 0;
}

/* Resets session k's result slot for request q (request_id written last). */
static __always_inline void kd_slot_reset(struct qk_result_slot *r, const struct qk_generate *g, u32 positions,
                                          u32 prompt_tokens, u32 cached) {
  __builtin_memcpy(r->session, g->hdr.session, QK_SESSION_BYTES);
  r->produced = 0;
  r->finish = 0;
  r->error = 0;
  r->cancel = 0;
  r->acked = 0;
  r->positions = positions;
  r->prompt_tokens = prompt_tokens;
  r->cached_tokens = cached;
  r->tokens = 0;
  r->last_poll_ns = 0;
  __sync_lock_test_and_set(&r->request_id, g->hdr.request_id);
}

/* A request that cannot run: its error in its session's slot when it has one. */
static __always_inline void kd_refuse(struct qk_kd_state *ks, s32 k, const struct qk_generate *g, u32 error) {
  __sync_fetch_and_add(&ks->refused, 1);
  if (k < 0) return;
  struct qk_result_slot *r = buf_lookup(&kd_results, (u32)k);
  if (!r) return;
  kd_slot_reset(r, g, 0, 0, 0);
  r->error = error;
  __sync_lock_test_and_set(&r->finish, QK_FINISH_ERROR);
}

/* Starts request `key` (taken); 0 started, else a qk_error (refused). The
 * caller holds the engine. */
static __always_inline u32 kd_take(struct qk_kd_state *ks, struct qn_drive_state *s, u32 key, s32 *kout) {
  struct qk_kd_request *q = buf_lookup(&kd_requests, key);
  if (!q) return QK_E_INTERNAL;
  const struct qk_generate *g = &q->g;
  *kout = -1;
  if (g->hdr.magic != QK_MAGIC || g->hdr.version != QK_VERSION || g->hdr.kind != QK_GENERATE ||
      (g->hdr.flags & ~QK_F_ALL) || g->hdr.request_id == 0 || !qk_valid_session(g->hdr.session))
    return QK_E_INVALID;
  s32 k = kd_session_of(g->hdr.session);
  *kout = k;
  if (k < 0) return QK_E_LIMIT;
  struct qk_kd_session *ss = buf_lookup(&kd_sessions, (u32)k);
  struct qk_result_slot *r = buf_lookup(&kd_results, (u32)k);
  s32 *prompt = buf_lookup(&drive_prompt, 0);
  if (!ss || !r || !prompt) return QK_E_INTERNAL;
  const u32 text = g->hdr.flags & QK_F_TEXT;
  const u32 bytes = (u32)g->prompt_len * (text ? 1 : 4);
  if (g->prompt_len == 0 || bytes > QK_MAX_PROMPT_BYTES || g->max_tokens == 0 ||
      g->sampling.temperature_q16 != 0) /* the kernel path decodes greedily */
    return QK_E_INVALID;
  u32 pos = 0, n0 = 0;
  if (g->hdr.flags & QK_F_APPEND) {
    pos = ss->positions;
    if (ss->pending_token >= 0) prompt[n0++] = ss->pending_token;
  }
  struct kd_feed f = {.req = key, .n0 = n0, .text = text, .len = g->prompt_len, .bad = 0};
  bpf_loop(QK_MAX_PROMPT_BYTES, kd_feed_cb, &f, 0);
  if (f.bad) return QK_E_INVALID;
  const u32 feed = n0 + g->prompt_len;
  if (pos + feed >= ss->kv_capacity) return QK_E_LIMIT; /* room for the feed and a token */
  struct qn_drive_submit *sub = &s->sub;
  __builtin_memset(sub, 0, sizeof(*sub));
  sub->tag = g->hdr.request_id;
  sub->kv_slot = ss->kv_slot;
  sub->kv_positions = ss->kv_capacity;
  sub->pos = pos;
  sub->feed_len = feed;
  sub->max_tokens = g->max_tokens > QK_KD_MAX_TOKENS ? QK_KD_MAX_TOKENS : g->max_tokens;
  sub->mode = QN_DRIVE_ARGMAX;
  sub->vocab_top_k = 1; /* greedy: the Sampler's wants() */
  sub->n_stop = ks->n_stop > QN_DRIVE_STOP_MAX ? QN_DRIVE_STOP_MAX : ks->n_stop;
  for (u32 j = 0; j < QN_DRIVE_STOP_MAX; j++) sub->stop_ids[j] = ks->stop_ids[j];
  sub->client = (u32)k + 1;
  if (drv_check(sub)) return QK_E_INVALID;
  kd_slot_reset(r, g, pos, pos + feed, pos);
  ss->request_id = g->hdr.request_id;
  ss->running = 1;
  __sync_fetch_and_add(&ks->started, 1);
  drv_begin(s);
  return 0;
}

/* Resumes session k's paused request: its pending token fed, the rest of
 * its tokens, its result slot as it was. 0 started, else a qk_error. */
static __always_inline u32 kd_resume(struct qk_kd_state *ks, struct qn_drive_state *s, u32 k) {
  struct qk_kd_session *ss = buf_lookup(&kd_sessions, k);
  s32 *prompt = buf_lookup(&drive_prompt, 0);
  if (!ss || !prompt || ss->pending_token < 0 || ss->paused_left == 0) return QK_E_INTERNAL;
  prompt[0] = ss->pending_token;
  struct qn_drive_submit *sub = &s->sub;
  __builtin_memset(sub, 0, sizeof(*sub));
  sub->tag = ss->request_id;
  sub->kv_slot = ss->kv_slot;
  sub->kv_positions = ss->kv_capacity;
  sub->pos = ss->positions;
  sub->feed_len = 1;
  sub->max_tokens = ss->paused_left;
  sub->mode = QN_DRIVE_ARGMAX;
  sub->vocab_top_k = 1;
  sub->n_stop = ks->n_stop > QN_DRIVE_STOP_MAX ? QN_DRIVE_STOP_MAX : ks->n_stop;
  for (u32 j = 0; j < QN_DRIVE_STOP_MAX; j++) sub->stop_ids[j] = ks->stop_ids[j];
  sub->draw0 = ss->paused_base; /* the token index goes on */
  sub->client = k + 1;
  if (drv_check(sub)) return QK_E_LIMIT;
  drv_begin(s);
  return 0;
}

/* The oldest ready request, taken (READY -> TAKEN), or -1. */
static __always_inline s32 kd_oldest(void) {
  s32 best = -1;
  u32 best_seq = 0;
  for (u32 i = 0; i < QK_KD_QUEUE; i++) {
    struct qk_kd_request *q = buf_lookup(&kd_requests, i);
    if (!q || q->state != QK_KD_READY) continue;
    if (best < 0 || (s32)(q->seq - best_seq) < 0) {
      best = (s32)i;
      best_seq = q->seq;
    }
  }
  if (best < 0) return -1;
  struct qk_kd_request *q = buf_lookup(&kd_requests, (u32)best);
  if (!q || __sync_val_compare_and_swap(&q->state, QK_KD_READY, QK_KD_TAKEN) != QK_KD_READY) return -1;
  return best;
}

static int kd_bell_cb(void *map, int *key, void *value) {
  struct qk_kd_state *ks = kd_st();
  struct qn_drive_state *s = drv_state();
  if (!ks || !s) return 0;
  __sync_fetch_and_add(&ks->rung, 1);
  if (!ks->enabled || ks->pending == 0) return 0;
  if (__sync_val_compare_and_swap(&s->owner, QN_OWNER_FREE, QN_OWNER_KERNEL) != QN_OWNER_FREE) {
    __sync_fetch_and_add(&ks->busy, 1); /* the daemon (or a kernel generation) holds the engine */
    kd_retry_later();
    return 0;
  }
  if (s->running || s->active) { /* the last chain's last link is still returning */
    __sync_lock_test_and_set(&s->owner, QN_OWNER_FREE);
    __sync_fetch_and_add(&ks->busy, 1);
    kd_retry_later();
    return 0;
  }
  u32 paused = ks->resume;
  if (paused) { /* a request paused for the daemon goes on first */
    u32 k = paused & 1 ? 0 : paused & 2 ? 1 : paused & 4 ? 2 : 3;
    __sync_fetch_and_and(&ks->resume, ~(1u << k));
    __sync_fetch_and_sub(&ks->pending, 1);
    if (kd_resume(ks, s, k)) { /* cannot go on: ends with an error in its slot */
      struct qk_kd_session *ss = buf_lookup(&kd_sessions, k);
      struct qk_result_slot *r = buf_lookup(&kd_results, k);
      if (ss) __sync_lock_test_and_set(&ss->running, 0);
      if (r) {
        r->error = QK_E_INTERNAL;
        __sync_lock_test_and_set(&r->finish, QK_FINISH_ERROR);
      }
      __sync_lock_test_and_set(&s->owner, QN_OWNER_FREE);
      if (ks->pending) kd_ring();
    }
    return 0;
  }
  s32 key_ = kd_oldest();
  if (key_ < 0) {
    __sync_lock_test_and_set(&s->owner, QN_OWNER_FREE);
    return 0;
  }
  __sync_fetch_and_sub(&ks->pending, 1);
  s32 k = -1;
  u32 err = kd_take(ks, s, (u32)key_, &k);
  struct qk_kd_request *q = buf_lookup(&kd_requests, (u32)key_);
  if (err) {
    if (q) kd_refuse(ks, k, &q->g, err);
    __sync_lock_test_and_set(&s->owner, QN_OWNER_FREE);
    if (ks->pending) kd_ring();
  }
  if (q) __sync_lock_test_and_set(&q->state, QK_KD_FREE); /* copied: the entry is free again */
  return 0;
}

static int kd_retry_cb(void *map, int *key, void *value) {
  kd_ring();
  return 0;
}

/* Sets the doorbell's and the retry timer's callbacks; run once at load. */
SEC("syscall")
int qn_kdoor_arm(struct qn_args *a) {
  int zero = 0;
  struct qk_kd_wq *w = bpf_map_lookup_elem(&kd_bell, &zero);
  struct qn_kd_timer *t = bpf_map_lookup_elem(&kd_retry, &zero);
  if (!w || !t) return a->status = __LINE__;
  int err = bpf_wq_init(&w->wq, &kd_bell, 0);
  if (!err) err = bpf_wq_set_callback_impl(&w->wq, kd_bell_cb, 0, 0);
  if (!err) err = bpf_timer_init(&t->timer, &kd_retry, 1 /* CLOCK_MONOTONIC */);
  if (!err) err = bpf_timer_set_callback(&t->timer, kd_retry_cb);
  return a->status = err;
}

/* Rings the doorbell (the daemon, after it hands the engine back while
 * requests wait; tests). */
SEC("syscall")
int qn_kdoor_ring(struct qn_args *a) { return a->status = kd_ring(); }

#endif
