/* Kernel-started generations (docs/kernel-driver.md, "Kernel-started
 * generations"; the client side: kdoor_client.h; the ABI: kclient_abi.h):
 * the maps a BPF client submits through (kdoor_maps.h) and reads from, and
 * what the driver's links do for a generation a kernel client started: each chosen
 * token goes into the session's result slot (kd_results) with its text
 * (kd_text), and the end publishes the finish, the session's positions,
 * hands the engine back (drive_state.owner) and rings the doorbell again
 * when more requests wait. Included by ops_drive.h before its links; the
 * doorbell program is ops_kdoor_bell.h.
 */
#ifndef QWEN3_BPF_OPS_KDOOR_H
#define QWEN3_BPF_OPS_KDOOR_H

#include "kdoor_maps.h" /* kd_bell, kd_requests, kd_state: shared with the clients */

struct qn_kd_timer {
  struct bpf_timer timer;
};

/* The retry: when the engine is held, the doorbell arms this timer (1 ms),
 * whose callback rings the doorbell again. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, int);
  __type(value, struct qn_kd_timer);
} kd_retry SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qk_kd_session));
  __uint(max_entries, QK_KD_SESSIONS);
  __uint(map_flags, BPF_F_MMAPABLE);
} kd_sessions SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qk_result_slot));
  __uint(max_entries, QK_KD_SESSIONS);
  __uint(map_flags, BPF_F_MMAPABLE);
} kd_results SEC(".maps");

/* One entry per vocabulary id (the loader sizes it). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qk_kd_text));
  __uint(max_entries, 1);
  __uint(map_flags, BPF_F_MMAPABLE);
} kd_text SEC(".maps");

static __always_inline struct qk_kd_state *kd_st(void) { return buf_lookup(&kd_state, 0); }

static __always_inline int kd_ring(void) {
  int zero = 0;
  struct qk_kd_wq *w = bpf_map_lookup_elem(&kd_bell, &zero);
  if (!w) return -1;
  return bpf_wq_start(&w->wq, 0);
}

/* One entry of the result ring: the token (or the rest of its text). */
static __always_inline void kd_entry(struct qk_result_slot *r, s32 id, u32 index, const struct qk_kd_text *t,
                                     u32 from, u32 flags) {
  u32 seq = r->produced;
  if (seq >= QK_RING) return; /* never past the ring: max_tokens is capped at QK_KD_MAX_TOKENS */
  struct qk_token *e = &r->ring[seq & (QK_RING - 1)];
  u32 n = 0;
  e->id = id;
  e->seq = seq;
  e->index = (__u16)index;
  e->flags = (__u8)flags;
  if (t) {
    u32 len = t->len > QK_KD_TEXT_BYTES ? QK_KD_TEXT_BYTES : t->len;
    for (u32 j = 0; j < QK_TOK_TEXT_BYTES; j++) {
      u32 at = from + j;
      if (at >= len || at >= QK_KD_TEXT_BYTES) break;
      e->text[j] = t->bytes[at];
      n++;
    }
  }
  e->text_len = (__u8)n;
  __sync_lock_test_and_set(&r->produced, seq + 1); /* the entry before the count */
}

/* A kernel client's generation chose `id` (the index-th token). */
static __always_inline void kd_token(struct qn_drive_state *s, s32 id) {
  u32 c = s->sub.client;
  if (c == 0) return;
  u32 k = c - 1;
  struct qk_result_slot *r = buf_lookup(&kd_results, k);
  if (!r) return;
  struct qk_kd_text *t = id >= 0 ? buf_lookup(&kd_text, (u32)id) : 0;
  const u32 index = (u32)s->sub.draw0 + s->generated; /* draw0: tokens chosen before a pause */
  kd_entry(r, id, index, t, 0, 0);
  if (t && t->len > QK_TOK_TEXT_BYTES) kd_entry(r, id, index, t, QK_TOK_TEXT_BYTES, QK_TOK_CONT);
  r->tokens = index + 1;
  if (r->cancel && r->cancel == r->request_id) s->cancel = 1; /* ends at the next link */
}

static __always_inline u32 kd_finish_code(u32 why) {
  if (why == QN_FINISH_STOP) return QK_FINISH_EOS; /* the kernel path's stop ids are the EOS ids */
  if (why == QN_FINISH_LENGTH) return QK_FINISH_LENGTH;
  if (why == QN_FINISH_CANCELLED) return QK_FINISH_CANCELLED;
  return QK_FINISH_ERROR;
}

/* A kernel client's generation ends (called once, by drv_end, before
 * running drops to 0): the slot's figures, then its finish (last); the
 * session's positions as the user driver leaves them (every fed token but
 * the last chosen one, which becomes the pending token an append feeds
 * first). */
static __always_inline void kd_end(struct qn_drive_state *s, u32 why, s32 token) {
  u32 c = s->sub.client;
  if (c == 0) return;
  u32 k = c - 1;
  struct qk_result_slot *r = buf_lookup(&kd_results, k);
  struct qk_kd_session *ss = buf_lookup(&kd_sessions, k);
  struct qk_kd_state *ks = kd_st();
  u32 g = s->generated + (token >= 0 ? 1 : 0); /* since the (re)start */
  u32 positions = g == 0 ? s->sub.pos : s->sub.pos + s->sub.feed_len + g - 1;
  const u32 before = (u32)s->sub.draw0;      /* chosen before a pause */
  if (ss) {
    if (why != QN_FINISH_ERROR) {
      ss->positions = positions;
      if (g > 0) ss->pending_token = token >= 0 ? token : s->last_token;
    } else {
      ss->positions = 0; /* the KV is not trusted after a failed operator: start again */
      ss->pending_token = -1;
    }
    ss->generations++;
    ss->tokens += g;
    ss->paused_left = 0;
  }
  if (ks) {
    __sync_fetch_and_add(&ks->served, 1);
    __sync_fetch_and_add(&ks->tokens, g);
  }
  if (r) {
    r->positions = ss ? ss->positions : positions;
    r->tokens = before + g;
    r->error = why == QN_FINISH_ERROR ? QK_E_INTERNAL : QK_OK;
    __sync_lock_test_and_set(&r->finish, kd_finish_code(why));
  }
  if (ss) __sync_lock_test_and_set(&ss->running, 0);
}

/* The daemon waits for the engine (drive_state.yield): a kernel-started
 * generation that goes on pauses after the token just chosen. The session
 * keeps where it is (positions, the token to feed next, what is left), its
 * result slot stays open, and the request is resumed first when the
 * doorbell next gets the engine. The end is drv_end's without a finish;
 * the doorbell is rung by the daemon when it hands the engine back (or the
 * 1 ms timer), not at once, so the daemon gets its turn. */
static __always_inline int kd_should_pause(struct qn_drive_state *s) { return s->sub.client && s->yield; }

static __always_inline void kd_pause(struct qn_drive_state *s, s32 id) {
  u32 k = (s->sub.client - 1) & (QK_KD_SESSIONS - 1);
  struct qk_kd_session *ss = buf_lookup(&kd_sessions, k);
  struct qk_kd_state *ks = kd_st();
  if (__sync_val_compare_and_swap(&s->running, 1, 2) != 1) return;
  const u32 g = s->generated + 1;
  if (ss) {
    ss->positions = s->sub.pos + s->sub.feed_len + g - 1;
    ss->pending_token = id;
    ss->paused_base = (u32)s->sub.draw0 + g;
    ss->paused_left = s->sub.max_tokens - g;
    ss->tokens += g;
  }
  if (ks) {
    __sync_fetch_and_or(&ks->resume, 1u << k);
    __sync_fetch_and_add(&ks->pending, 1);
    __sync_fetch_and_add(&ks->yields, 1);
    __sync_fetch_and_add(&ks->tokens, g);
  }
  s->finish = QN_FINISH_LENGTH;
  s->t_end_ns = bpf_ktime_get_ns();
  __sync_lock_test_and_set(&s->running, 0);
  __sync_lock_test_and_set(&s->owner, QN_OWNER_FREE);
  int zero = 0;
  struct qn_kd_timer *t = bpf_map_lookup_elem(&kd_retry, &zero);
  if (t) bpf_timer_start(&t->timer, 1000000 /* 1 ms */, 0);
}

/* After the end's last record: the engine goes back to whoever waits, and
 * the doorbell rings again for the next request. */
static __always_inline void kd_release(struct qn_drive_state *s) {
  if (s->sub.client == 0) return;
  __sync_lock_test_and_set(&s->owner, QN_OWNER_FREE);
  struct qk_kd_state *ks = kd_st();
  if (ks && ks->pending) kd_ring();
}

#endif
