/* The low-bit kernel probe: today's q8 kernel (kernel_q8.h) and the q4a8
 * kernel (kernel_q4a8.h) over one matrix of LB_COLS columns, in the same loop
 * structure as the forward programs (a bpf_loop over blocks, one over
 * groups), so that their cost per product compares like for like. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

typedef __u8 u8;
typedef __s32 s32;
typedef __u32 u32;
typedef __s64 s64;
typedef __u64 u64;
#define QN_WQ /* weights in a map, as the default path */

#include "kernel_q8.h"
#include "kernel_q4a8.h"
#include "lowbit_probe_abi.h"

char LICENSE[] SEC("license") = "GPL";

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, LB_MAX_BLOCKS);
  __type(key, u32);
  __type(value, struct lb_block);
} lb_weights SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, u32);
  __type(value, struct lb_input);
} lb_in SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, u32);
  __type(value, struct lb_output);
} lb_out SEC(".maps");

struct group_ctx {
  const u8 *w;
  struct lb_input *in;
  void *dot; /* struct qn_dot8 or qn_dot16 */
};

static long q8_group_cb(u64 g, void *ctx) {
  struct group_ctx *gc = ctx;
  if (g >= LB_Q8_GROUPS) return 1;
  u64 t0, t1, t2, t3;
  q8_group_asm((const u64 *)(gc->w + qn_q8_bcol_off(g, 0)), gc->in->x + g * QN_GROUP, &t0, &t1, &t2, &t3);
  dot8_q8_lanes(gc->w, gc->in->xsum, g, t0, t1, t2, t3, gc->dot);
  return 0;
}

static long q4a8_group_cb(u64 g, void *ctx) {
  struct group_ctx *gc = ctx;
  if (g >= LB_Q4_GROUPS) return 1;
  dot16_q4a8_group(gc->w, g, gc->in->xu + g * QN_Q4_GROUP, gc->in->xs[g], gc->in->corr[g], gc->dot);
  return 0;
}

struct block_ctx {
  struct lb_args *args;
  struct lb_input *in;
  struct lb_output *out;
  int q4;
};

static long block_cb(u64 i, void *ctx) {
  struct block_ctx *bc = ctx;
  u32 blocks = bc->args->blocks;
  if (blocks == 0) return 1;
  u32 b = (u32)i % blocks;
  const u8 *w = bpf_map_lookup_elem(&lb_weights, &b);
  if (!w) return 1;
  if (bc->q4) {
    struct qn_dot16 d = {};
    struct group_ctx gc = {w, bc->in, &d};
    bpf_loop(LB_Q4_GROUPS, q4a8_group_cb, &gc, 0);
    if (b >= LB_MAX_ROWS / QN_Q4_BLOCK_ROWS) return 1;
    for (int j = 0; j < QN_Q4_BLOCK_ROWS; j++) bc->out->y[b * QN_Q4_BLOCK_ROWS + j] = d.y[j];
  } else {
    struct qn_dot8 d = {};
    struct group_ctx gc = {w, bc->in, &d};
    bpf_loop(LB_Q8_GROUPS, q8_group_cb, &gc, 0);
    if (b >= LB_MAX_ROWS / QN_Q8_BLOCK_ROWS) return 1;
    for (int j = 0; j < QN_Q8_BLOCK_ROWS; j++) bc->out->y[b * QN_Q8_BLOCK_ROWS + j] = d.y[j];
  }
  return 0;
}

static __always_inline int run_matrix(struct lb_args *args, int q4) {
  u32 k = 0;
  struct lb_input *in = bpf_map_lookup_elem(&lb_in, &k);
  struct lb_output *out = bpf_map_lookup_elem(&lb_out, &k);
  if (!in || !out) return -1;
  u32 limit = q4 ? LB_MAX_ROWS / QN_Q4_BLOCK_ROWS : LB_MAX_BLOCKS;
  if (args->blocks == 0 || args->blocks > limit) return -2;
  struct block_ctx bc = {args, in, out, q4};
  bpf_loop((u64)args->blocks * args->reps, block_cb, &bc, 0);
  return 0;
}

SEC("syscall")
int lb_q8(struct lb_args *args) { return run_matrix(args, 0); }

SEC("syscall")
int lb_q4a8(struct lb_args *args) { return run_matrix(args, 1); }

/* The q8 kernel's group sums and the q4a8 kernel's 8-bit input, from x. */
SEC("syscall")
int lb_prepare(void *unused) {
  u32 k = 0;
  struct lb_input *in = bpf_map_lookup_elem(&lb_in, &k);
  if (!in) return -1;
  for (int g = 0; g < LB_Q8_GROUPS; g++) {
    s64 sum = 0;
    for (int c = 0; c < QN_GROUP; c++) sum += in->x[g * QN_GROUP + c];
    in->xsum[g] = (s32)sum;
  }
  for (int g = 0; g < LB_COLS / QN_A8_GROUP; g++)
    qn_a8_quantize_group(in->x + g * QN_A8_GROUP, in->xu + g * QN_A8_GROUP, &in->xs[g], &in->corr[g]);
  return 0;
}
