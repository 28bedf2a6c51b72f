/* What the low-bit kernel probe's BPF programs (lowbit_probe.bpf.c) and its
 * driver (lowbit_probe.cpp) share: the matrix limits, the block sizes of the
 * three formats, the input map's value and the programs' arguments. C and C++. */
#ifndef QWEN3_LOWBIT_PROBE_ABI_H
#define QWEN3_LOWBIT_PROBE_ABI_H

#include "layout.h"
#include "numerics_q8a8.h"

#define LB_MAX_COLS 1024 /* input length: Qwen3-0.6B's hidden size */
/* the shipped model's vocabulary (151,936 rows) rounded up to whole blocks of all three formats (8, 16, 12 rows) */
#define LB_MAX_ROWS 151968
#define LB_MAX_Q8_GROUPS (LB_MAX_COLS / QN_GROUP)
#define LB_MAX_A8_GROUPS (LB_MAX_COLS / QN_A8_GROUP)

#ifdef __cplusplus
static_assert(QN_A8_GROUP == QN_Q4_GROUP, "q4a8 reads one input scale per weight group");
static_assert(LB_MAX_ROWS % QN_Q8_BLOCK_ROWS == 0 && LB_MAX_ROWS % QN_Q4_BLOCK_ROWS == 0 &&
                  LB_MAX_ROWS % QN_Q8A8_BLOCK_ROWS == 0,
              "whole blocks of every format");
#else
_Static_assert(QN_A8_GROUP == QN_Q4_GROUP, "q4a8 reads one input scale per weight group");
#endif

/* One weights-map entry is one block; the driver sizes each format's map for
 * the matrix (--cols, --rows) before loading, so blocks lie back to back. */
QN_INLINE qn_u32 lb_q8_block_bytes(qn_u32 cols) { return cols / QN_GROUP * QN_Q8_BGROUP_BYTES; }
QN_INLINE qn_u32 lb_q4_block_bytes(qn_u32 cols) { return cols / QN_Q4_GROUP * QN_Q4_BGROUP_BYTES; }
QN_INLINE qn_u32 lb_q8a8_block_bytes(qn_u32 cols) { return cols / QN_GROUP * QN_Q8A8_BGROUP_BYTES; }

/* The matrix's column count, fixed before loading (.rodata: the verifier
 * reads it as a constant and so bounds the group loops' offsets). */
struct lb_config {
  qn_u32 cols;
};

/* The input vector in all formats: q8 reads x and xsum (its group sums);
 * q4a8 reads xu, xs and corr, which lb_prepare writes from x; q8a8 reads xu,
 * xs and a8_start (its accumulators' input share, numerics_q8a8.h). Columns
 * past the matrix's are zero. */
struct lb_input {
  qn_s32 x[LB_MAX_COLS];
  qn_s32 xsum[LB_MAX_Q8_GROUPS];
  qn_u8 xu[LB_MAX_COLS];
  qn_s64 xs[LB_MAX_A8_GROUPS];
  qn_s64 corr[LB_MAX_A8_GROUPS];
  qn_u64 a8_start[LB_MAX_A8_GROUPS];
};

struct lb_output {
  qn_s64 y[LB_MAX_ROWS];
};

/* lb_q8 / lb_q4a8 / lb_q8a8: the matrix's first `blocks` blocks, `reps` times over. */
struct lb_args {
  qn_u32 blocks, reps;
};

#endif
