/* Maps and load-time constants of the forward-pass programs (BPF side).
 * Every size below is set by the engine before load (bpf_map__set_value_size,
 * bpf_map__set_max_entries, .rodata SHAPE), so the verifier knows the exact
 * bounds and one object serves every model shape.
 */
#ifndef QWEN3_BPF_MAPS_H
#define QWEN3_BPF_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "op_args.h"

#ifndef BPF_MAP_TYPE_ARENA
#define BPF_MAP_TYPE_ARENA 33 /* missing from Debian 12's uapi headers */
#endif

typedef __u8 u8;
typedef qn_s8 s8;
typedef qn_s32 s32;
typedef qn_u32 u32;
typedef qn_s64 s64;
typedef qn_u64 u64;

/* Model shape; .rodata, so the verifier sees these as constants. */
const volatile struct qn_shape SHAPE = {};
/* Element strides (int32) of the activation buffers, each padded to QN_GROUP. */
const volatile u32 HID_PAD = 64, QKV_PAD = 64, QD_PAD = 64, INTER_PAD = 64, IN_PAD = 64;
const volatile u32 ROPE_POSITIONS = 1; /* rows of the RoPE table */

#define QN_DEFINE_BUFFER(NAME, ENTRIES)                 \
  struct {                                              \
    __uint(type, BPF_MAP_TYPE_ARRAY);                   \
    __uint(key_size, 4);                                \
    __uint(value_size, 8);                              \
    __uint(max_entries, ENTRIES);                       \
    __uint(map_flags, BPF_F_MMAPABLE);                  \
  } NAME SEC(".maps")

/* Activations of the positions of one pass: [QN_PMAX][stride] int32 Q16. */
QN_DEFINE_BUFFER(resid_buf, 1);
QN_DEFINE_BUFFER(qkv_buf, 1);
QN_DEFINE_BUFFER(attn_buf, 1);
QN_DEFINE_BUFFER(mlp_buf, 1);
/* Per-worker maps have SHAPE.threads entries (set at load). */
/* Per worker: requantized matmul input (layout.h: qn_xq_*). */
QN_DEFINE_BUFFER(xq_buf, 1);
/* Per worker: attention scratch, per query head of a GQA group (layout.h: qn_att_*). */
QN_DEFINE_BUFFER(att_buf, 1);
/* Per worker: accumulators of loops run by bpf_loop. Kept in map memory, not
 * on the stack, so the verifier sees the same state on every iteration and
 * verifies each callback once instead of once per possible value. */
struct qn_acc {
  __u64 max_abs;
  __u64 ss;
  __s64 smax;
  __u64 sum;
  __u32 err; /* first failed check (source line); also kept off the stack */
  __u32 row; /* matmul: row of the current nested position loop */
  /* attention: the query head being computed */
  __u32 p, pos, h, qh;
  __s32 sq;
  __u32 pad;
};
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qn_acc));
  __uint(max_entries, 1); /* SHAPE.threads */
} acc_buf SEC(".maps");
static __always_inline struct qn_acc *acc_of(u32 thread) {
  return bpf_map_lookup_elem(&acc_buf, &thread);
}
/* Records a failed check of a bpf_loop callback and stops the loop. */
static __always_inline long qn_fail(u32 thread, u32 line) {
  struct qn_acc *a = acc_of(thread);
  if (a && !a->err) a->err = line;
  return 1;
}
static __always_inline u32 qn_err(u32 thread) {
  struct qn_acc *a = acc_of(thread);
  return a ? a->err : __LINE__;
}
static __always_inline void qn_clear_err(u32 thread) {
  struct qn_acc *a = acc_of(thread);
  if (a) a->err = 0;
}

/* Logits of positions that asked for them: [QN_PMAX][vocab] int32 Q16. */
QN_DEFINE_BUFFER(logits_buf, 1);
/* Per worker and logit position: argmax and top-k (struct qn_topk_slot), then
 * the merged slot of each logit position (layout.h: qn_topk_key). */
QN_DEFINE_BUFFER(topk_buf, 1);
/* Norm weights (Q24): per layer input, post-attention, q, k; then final. */
QN_DEFINE_BUFFER(norms_buf, 1);
/* RoPE cos/sin per position: [hd/2] cos then [hd/2] sin, Q30. */
QN_DEFINE_BUFFER(rope_buf, 1);

#ifdef QN_WEIGHTS_ARENA
#define __arena __attribute__((address_space(1)))
struct {
  __uint(type, BPF_MAP_TYPE_ARENA);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, 1); /* pages; set at load */
} weights_arena SEC(".maps");
#define QN_WQ __arena
#else
/* Weights: entries of QN_WENTRY_BYTES; rows never straddle entries. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, QN_WENTRY_BYTES);
  __uint(max_entries, 1); /* set at load */
  __uint(map_flags, BPF_F_MMAPABLE);
} weights_map SEC(".maps");
#define QN_WQ
#endif

/* A session's KV cache: one entry per block of 32 positions of one kv head and layer
 * (layout.h; docs/kv-cache.md).
 * The template's value size is set at load; inner maps differ in max_entries. */
struct kv_inner_map {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, 8);
  __uint(max_entries, 1);
  __uint(map_flags, BPF_F_INNER_MAP);
};
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
  __uint(key_size, 4);
  __uint(max_entries, QN_MAX_SESSIONS);
  __array(values, struct kv_inner_map);
} kv_outer SEC(".maps");

static __always_inline void *buf_lookup(void *map, u32 key) { return bpf_map_lookup_elem(map, &key); }

/* Keeps clang from folding a bounds-checked value back into an unchecked one. */
#define QN_BARRIER(v) asm volatile("" : "+r"(v))

/* The sampling program's parameters, candidates, history bitmap and kept set
 * (layout.h: qn_sample_*). Its own map, not acc_buf: it runs while a forward
 * pass runs on the workers. */
QN_DEFINE_BUFFER(sample_buf, 1);

#endif
