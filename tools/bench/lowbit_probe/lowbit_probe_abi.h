/* What the low-bit kernel probe's BPF programs (lowbit_probe.bpf.c) and its
 * driver (lowbit_probe.cpp) share: the matrix shape, the input map's value
 * and the programs' arguments. C and C++. */
#ifndef QWEN3_LOWBIT_PROBE_ABI_H
#define QWEN3_LOWBIT_PROBE_ABI_H

#include "layout.h"

#define LB_COLS 1024 /* input length: Qwen3-0.6B's hidden size */
#define LB_MAX_ROWS 16384
#define LB_Q8_GROUPS (LB_COLS / QN_GROUP)
#define LB_Q4_GROUPS (LB_COLS / QN_Q4_GROUP)
#define LB_Q8_BLOCK_BYTES (LB_Q8_GROUPS * QN_Q8_BGROUP_BYTES)
#define LB_Q4_BLOCK_BYTES (LB_Q4_GROUPS * QN_Q4_BGROUP_BYTES)
/* one weights-map entry holds one block of either format */
#define LB_BLOCK_BYTES (LB_Q4_BLOCK_BYTES > LB_Q8_BLOCK_BYTES ? LB_Q4_BLOCK_BYTES : LB_Q8_BLOCK_BYTES)
#define LB_MAX_BLOCKS (LB_MAX_ROWS / QN_Q8_BLOCK_ROWS)

#ifdef __cplusplus
static_assert(QN_A8_GROUP == QN_Q4_GROUP, "q4a8 reads one input scale per weight group");
#else
_Static_assert(QN_A8_GROUP == QN_Q4_GROUP, "q4a8 reads one input scale per weight group");
#endif

struct lb_block {
  qn_u8 bytes[LB_BLOCK_BYTES];
};

/* The input vector in both formats: q8 reads x and xsum (its group sums);
 * q4a8 reads xu, xs and corr, which lb_quantize writes from x. */
struct lb_input {
  qn_s32 x[LB_COLS];
  qn_s32 xsum[LB_Q8_GROUPS];
  qn_u8 xu[LB_COLS];
  qn_s64 xs[LB_COLS / QN_A8_GROUP];
  qn_s64 corr[LB_COLS / QN_A8_GROUP];
};

struct lb_output {
  qn_s64 y[LB_MAX_ROWS];
};

/* lb_q8 / lb_q4a8: the matrix's first `blocks` blocks, `reps` times over. */
struct lb_args {
  qn_u32 blocks, reps;
};

#endif
