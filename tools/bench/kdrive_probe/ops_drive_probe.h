/* EXPERIMENT (docs/kernel-driver.md, design (c)): can one program run a whole
 * token's operator sequence by calling the existing operators as global
 * functions? Each qn_g_* is verified once on its own; the driver calls them
 * per layer from one bpf_loop callback. One worker (thread 0), no barriers.
 * To reproduce: append to bpf_ops/forward_map.bpf.c
 *   [#define QN_DRIVE_PROBE_NO_ATTENTION 1]
 *   #include "../tools/bench/kdrive_probe/ops_drive_probe.h"
 * and run `kdrive_probe ops q8`: the verifier's verdict on qn_drive_probe.
 * With QN_DRIVE_PROBE_WQ defined instead, only qn_drive_arm_matmul: the
 * matmul operator as a bpf_wq callback (design (b)'s links). */
#ifndef QWEN3_BPF_OPS_DRIVE_PROBE_H
#define QWEN3_BPF_OPS_DRIVE_PROBE_H

#include "ops_attention.h"
#include "ops_embed.h"
#include "ops_sample.h"
#include "ops_topk.h"

__attribute__((noinline)) int qn_g_matmul(struct qn_args *a) {
  if (!a) return -1;
  return mm_main(a, QN_MM_NORMED);
}
__attribute__((noinline)) int qn_g_matmul_proj(struct qn_args *a) {
  if (!a) return -1;
  return mm_main(a, QN_MM_PROJ);
}
__attribute__((noinline)) int qn_g_attention(struct qn_args *a) {
  if (!a) return -1;
#ifdef QN_DRIVE_PROBE_NO_ATTENTION /* the sum without attention's ~465k */
  return 0;
#else
  return att_main(a);
#endif
}
__attribute__((noinline)) int qn_g_embed(struct qn_args *a) {
  if (!a) return -1;
  return emb_main(a);
}
__attribute__((noinline)) int qn_g_merge(struct qn_args *a) {
  if (!a) return -1;
  return merge_main(a);
}
__attribute__((noinline)) int qn_g_sample(struct qn_args *a) {
  if (!a) return -1;
  return smp_main(a);
}

/* The argument block lives in map memory, not on the driver's stack: the
 * verifier adds up the stack of every frame of a call chain (512 bytes). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qn_args));
  __uint(max_entries, 1);
} drive_args SEC(".maps");

struct drive_ctx {
  struct qn_args *a; /* bpf_loop's context must be on the stack; the block is not */
};
static long drive_layer_cb(u64 l, void *ctx) {
  struct qn_args *a = ((struct drive_ctx *)ctx)->a;
  a->layer = (u32)l;
  a->op = QN_OP_QKV;
  if (qn_g_matmul(a)) return 1;
  if (qn_g_attention(a)) return 1;
  a->op = QN_OP_O;
  if (qn_g_matmul_proj(a)) return 1;
  a->op = QN_OP_GATEUP;
  if (qn_g_matmul(a)) return 1;
  a->op = QN_OP_DOWN;
  if (qn_g_matmul_proj(a)) return 1;
  return 0;
}

#ifdef QN_DRIVE_PROBE_WQ
/* Debian 12's uapi headers predate bpf_wq (Linux 6.10); the uapi layout. */
struct bpf_wq {
  __u64 __opaque[2];
} __attribute__((aligned(8)));
extern int bpf_wq_init(struct bpf_wq *wq, void *p__map, unsigned int flags) __ksym;
extern int bpf_wq_start(struct bpf_wq *wq, unsigned int flags) __ksym;
extern int bpf_wq_set_callback_impl(struct bpf_wq *wq, int (callback_fn)(void *map, int *key, void *value),
                                    unsigned int flags, void *aux__ign) __ksym;
struct drive_link {
  struct bpf_wq wq;
};
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 2);
  __type(key, int);
  __type(value, struct drive_link);
} drive_links SEC(".maps");

/* A link: this CPU's share of one matmul, the arguments from the map. */
static int drive_matmul_cb(void *map, int *key, void *value) {
  u32 k = 0;
  struct qn_args *a = bpf_map_lookup_elem(&drive_args, &k);
  if (a) qn_g_matmul(a);
  return 0;
}

SEC("syscall")
int qn_drive_arm_matmul(struct qn_args *ctx) {
  int k = 0;
  struct drive_link *l = bpf_map_lookup_elem(&drive_links, &k);
  if (!l) return ctx->status = -1;
  ctx->status = bpf_wq_init(&l->wq, &drive_links, 0);
  if (!ctx->status) ctx->status = bpf_wq_set_callback_impl(&l->wq, drive_matmul_cb, 0, 0);
  return ctx->status;
}
#else
SEC("syscall")
int qn_drive_probe(struct qn_args *ctx) {
  u32 k = 0;
  struct qn_args *a = bpf_map_lookup_elem(&drive_args, &k);
  if (!a) return 0;
  *a = *ctx;
  struct drive_ctx d = {a};
  if (qn_g_embed(a)) goto out;
  bpf_loop(SHAPE.n_layers, drive_layer_cb, &d, 0);
  if (a->status) goto out;
  a->op = QN_OP_VOCAB;
  if (qn_g_matmul(a)) goto out;
  if (qn_g_merge(a)) goto out;
  qn_g_sample(a);
out:
  ctx->status = a->status;
  return 0;
}

#endif /* QN_DRIVE_PROBE_WQ */

#endif
