/* The low-bit kernel probe: today's q8 kernel (kernel_q8.h), the q4a8 kernel
 * (kernel_q4a8.h) and the q8a8 kernel (kernel_q8a8.h) over one matrix of
 * lb_cfg.cols columns, in the same loop structure as the forward programs (a
 * bpf_loop over blocks, one over groups), so that their cost per product
 * compares like for like. */
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
#include "kernel_q8a8.h"
#include "lowbit_probe_abi.h"

char LICENSE[] SEC("license") = "GPL";

const volatile struct lb_config lb_cfg SEC(".rodata.lb_config") = {LB_MAX_COLS};

/* One map per format, one block per entry: lowbit_probe.cpp sets value_size
 * (the format's block bytes for lb_cfg.cols) and max_entries before loading. */
#define LB_WEIGHTS_MAP(name)                 \
  struct {                                   \
    __uint(type, BPF_MAP_TYPE_ARRAY);        \
    __uint(max_entries, 1);                  \
    __uint(key_size, sizeof(u32));           \
    __uint(value_size, QN_Q8_BGROUP_BYTES);  \
  } name SEC(".maps")
LB_WEIGHTS_MAP(lb_w_q8);
LB_WEIGHTS_MAP(lb_w_q4a8);
LB_WEIGHTS_MAP(lb_w_q8a8);

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

/* Group g of the matrix exists: g < cols / group_cols, and below the largest
 * matrix's count as a constant too (it lets clang keep g's arithmetic in 64 bits). */
static __always_inline int lb_group_in_range(u64 g, u32 group_cols) {
  return g < LB_MAX_COLS / group_cols && g < lb_cfg.cols / group_cols;
}

struct group_ctx {
  const u8 *w;
  struct lb_input *in;
  void *dot; /* struct qn_dot8, qn_dot16 or qn_dot12 */
};

static long q8_group_cb(u64 g, void *ctx) {
  struct group_ctx *gc = ctx;
  if (!lb_group_in_range(g, QN_GROUP)) return 1;
  u64 t0, t1, t2, t3;
  q8_group_asm((const u64 *)(gc->w + qn_q8_bcol_off(g, 0)), gc->in->x + g * QN_GROUP, &t0, &t1, &t2, &t3);
  dot8_q8_lanes(gc->w, gc->in->xsum, g, t0, t1, t2, t3, gc->dot);
  return 0;
}

static long q4a8_group_cb(u64 g, void *ctx) {
  struct group_ctx *gc = ctx;
  if (!lb_group_in_range(g, QN_Q4_GROUP)) return 1;
  dot16_q4a8_group(gc->w, g, gc->in->xu + g * QN_Q4_GROUP, gc->in->xs[g], gc->in->corr[g], gc->dot);
  return 0;
}

/* One weight group of 64 columns = two input groups (q8's scale granularity). */
static long q8a8_group_cb(u64 g, void *ctx) {
  struct group_ctx *gc = ctx;
  if (!lb_group_in_range(g, QN_GROUP)) return 1;
  u64 a = 2 * g; /* the first input group */
  dot12_q8a8_group(gc->w, g, gc->in->xu + g * QN_GROUP, &gc->in->xs[a], &gc->in->a8_start[a], gc->dot);
  return 0;
}

struct block_ctx {
  struct lb_args *args;
  struct lb_input *in;
  struct lb_output *out;
};

/* Block i mod blocks of `weights` (rows rows per block): its group loop into
 * dot (zeroed by the caller; y its row sums), then y into the output. */
static __always_inline long run_block(struct block_ctx *bc, u64 i, void *weights, void *group_cb, void *dot,
                                      const s64 *y, u32 rows, u32 groups) {
  u32 blocks = bc->args->blocks;
  if (blocks == 0) return 1;
  u32 b = (u32)i % blocks;
  const u8 *w = bpf_map_lookup_elem(weights, &b);
  if (!w) return 1;
  struct group_ctx gc = {w, bc->in, dot};
  bpf_loop(groups, group_cb, &gc, 0);
  if (b >= LB_MAX_ROWS / rows) return 1;
  for (u32 j = 0; j < rows; j++) bc->out->y[b * rows + j] = y[j];
  return 0;
}

static long q8_block_cb(u64 i, void *ctx) {
  struct qn_dot8 d = {};
  return run_block(ctx, i, &lb_w_q8, q8_group_cb, &d, d.y, QN_Q8_BLOCK_ROWS, lb_cfg.cols / QN_GROUP);
}

static long q4a8_block_cb(u64 i, void *ctx) {
  struct qn_dot16 d = {};
  return run_block(ctx, i, &lb_w_q4a8, q4a8_group_cb, &d, d.y, QN_Q4_BLOCK_ROWS, lb_cfg.cols / QN_Q4_GROUP);
}

static long q8a8_block_cb(u64 i, void *ctx) {
  struct qn_dot12 d = {};
  return run_block(ctx, i, &lb_w_q8a8, q8a8_group_cb, &d, d.y, QN_Q8A8_BLOCK_ROWS, lb_cfg.cols / QN_GROUP);
}

static __always_inline int run_matrix(struct lb_args *args, void *block_cb, u32 rows) {
  u32 k = 0;
  struct lb_input *in = bpf_map_lookup_elem(&lb_in, &k);
  struct lb_output *out = bpf_map_lookup_elem(&lb_out, &k);
  if (!in || !out) return -1;
  if (args->blocks == 0 || args->blocks > LB_MAX_ROWS / rows) return -2;
  struct block_ctx bc = {args, in, out};
  bpf_loop((u64)args->blocks * args->reps, block_cb, &bc, 0);
  return 0;
}

SEC("syscall")
int lb_q8(struct lb_args *args) { return run_matrix(args, q8_block_cb, QN_Q8_BLOCK_ROWS); }

SEC("syscall")
int lb_q4a8(struct lb_args *args) { return run_matrix(args, q4a8_block_cb, QN_Q4_BLOCK_ROWS); }

SEC("syscall")
int lb_q8a8(struct lb_args *args) { return run_matrix(args, q8a8_block_cb, QN_Q8A8_BLOCK_ROWS); }

/* The q8 kernel's group sums and the 8-bit input of q4a8 and q8a8, from x. */
SEC("syscall")
int lb_prepare(void *unused) {
  u32 k = 0;
  struct lb_input *in = bpf_map_lookup_elem(&lb_in, &k);
  if (!in) return -1;
  for (int g = 0; g < LB_MAX_Q8_GROUPS; g++) {
    s64 sum = 0;
    for (int c = 0; c < QN_GROUP; c++) sum += in->x[g * QN_GROUP + c];
    in->xsum[g] = (s32)sum;
  }
  for (int g = 0; g < LB_MAX_A8_GROUPS; g++) {
    qn_a8_quantize_group(in->x + g * QN_A8_GROUP, in->xu + g * QN_A8_GROUP, &in->xs[g], &in->corr[g]);
    in->a8_start[g] = qn_q8a8_input_start(in->corr[g]);
  }
  return 0;
}
