/* The client side of kernel-started generations, for BPF programs
 * (docs/kernel-clients.md, "The kernel path"): the daemon's pinned maps
 * (kdoor_maps.h, the engine's own definitions; a loader points them at the
 * pins with bpf_map__reuse_fd), and the two steps of a submission:
 *
 *   int key = kd_client_claim();                   // a free entry's key, or -1 (counted as shed)
 *   struct qk_kd_request *q = kd_client_entry(key);
 *   ... fill q->g (a qk_generate: session, prompt bytes or ids, max_tokens, greedy) ...
 *   kd_client_submit(q);                           // ready, then rings the doorbell (bpf_wq_start)
 *
 * The program must be of a type that may call the generic kfuncs (bpf_wq_start):
 * tracing (tp_btf, fentry, fexit), XDP, tc, syscall, struct_ops; not a
 * classic tracepoint, kprobe or raw tracepoint (the verifier refuses maps
 * holding a bpf_wq there). The answer appears in kd_results[k], k the index of
 * the session's entry in kd_sessions.
 */
#ifndef QWEN3_BPF_KDOOR_CLIENT_H
#define QWEN3_BPF_KDOOR_CLIENT_H

#include "kclient_abi.h"

#ifndef QWEN3_BPF_HAVE_WQ
#define QWEN3_BPF_HAVE_WQ
/* Debian 12's uapi headers predate bpf_wq (Linux 6.10); the uapi layout. */
struct bpf_wq {
  __u64 __opaque[2];
} __attribute__((aligned(8)));
extern int bpf_wq_start(struct bpf_wq *wq, unsigned int flags) __ksym;
#endif

#include "kdoor_maps.h"

static __always_inline struct qk_kd_request *kd_client_entry(int key) {
  __u32 k = (__u32)key;
  return bpf_map_lookup_elem(&kd_requests, &k);
}

/* The key of a free request entry, now the caller's (WRITING); -1 when all are taken. */
static __always_inline int kd_client_claim(void) {
  for (__u32 i = 0; i < QK_KD_QUEUE; i++) {
    struct qk_kd_request *q = kd_client_entry((int)i);
    if (q && q->state == QK_KD_FREE && __sync_val_compare_and_swap(&q->state, QK_KD_FREE, QK_KD_WRITING) == QK_KD_FREE)
      return (int)i;
  }
  __u32 zero = 0;
  struct qk_kd_state *ks = bpf_map_lookup_elem(&kd_state, &zero);
  if (ks) __sync_fetch_and_add(&ks->shed, 1);
  return -1;
}

/* Publishes a filled entry and rings the doorbell; 0 or the kfunc's error. */
static __always_inline int kd_client_submit(struct qk_kd_request *q) {
  __u32 zero = 0;
  struct qk_kd_state *ks = bpf_map_lookup_elem(&kd_state, &zero);
  struct qk_kd_wq *w = bpf_map_lookup_elem(&kd_bell, &zero);
  if (!ks || !w) {
    __sync_lock_test_and_set(&q->state, QK_KD_FREE);
    return -1;
  }
  q->seq = __sync_fetch_and_add(&ks->seq, 1);
  __sync_lock_test_and_set(&q->state, QK_KD_READY);
  __sync_fetch_and_add(&ks->pending, 1);
  return bpf_wq_start(&w->wq, 0);
}

#endif
