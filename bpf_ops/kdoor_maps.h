/* The maps a BPF client of kernel-started generations shares with the
 * engine through their pins (kernel_client_pin_dir; docs/kernel-clients.md,
 * "The kernel path"): the one definition of their names, types and sizes,
 * included by the engine's side (ops_kdoor.h, which creates and pins them)
 * and by the client's (kdoor_client.h, whose loader points them at the pins
 * with bpf_map__reuse_fd, which checks type, sizes and flags).
 * Needs struct bpf_wq and bpf_helpers.h's map macros before it.
 */
#ifndef QWEN3_BPF_KDOOR_MAPS_H
#define QWEN3_BPF_KDOOR_MAPS_H

#include "kclient_abi.h"

struct qk_kd_wq {
  struct bpf_wq wq;
};

/* The doorbell: one wq whose callback (ops_kdoor_bell.h) starts a waiting
 * request; any program holding the map may bpf_wq_start it. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, int);
  __type(value, struct qk_kd_wq);
} kd_bell SEC(".maps");

/* The submission queue: a client claims a FREE entry, fills it, marks it READY. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qk_kd_request));
  __uint(max_entries, QK_KD_QUEUE);
} kd_requests SEC(".maps");

/* The doorbell's state (enabled, the tables, seq, pending, the counters), mmapped by the daemon. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qk_kd_state));
  __uint(max_entries, 1);
  __uint(map_flags, BPF_F_MMAPABLE);
} kd_state SEC(".maps");

#endif
