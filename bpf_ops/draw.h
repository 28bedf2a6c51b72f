/* The seeded draw of sampling: which kept token a uniform number picks.
 * Compiles as BPF C (qn_sample, ops_sample.h) and as C++ (the Sampler,
 * daemon/sampling), so the kernel and user space pick the same token from the
 * same probabilities by construction.
 *
 * The generator is counter based: Philox4x32-10 (Salmon, Moraes, Dror and
 * Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11), a pure
 * function of (key, counter) with no state to carry between draws, so any
 * program that knows the request's seed and the draw's index computes the
 * same bits. Key = the 64-bit seed; counter = (index low, index high,
 * QN_DRAW_STREAM, 0). A request's draw index counts the tokens it has chosen
 * (0 for the token after the prompt), one index per token, so a speculative
 * step that accepts k drafts uses exactly the indices of k + 1 plain steps.
 *
 * The pick: the kept probabilities w_i (Q40, in candidate order) sum to T;
 * r = floor(bits * T / 2^64) is in [0, T), and the token is the first i with
 * r < w_0 + ... + w_i. Each value of r has floor or ceil of 2^64 / T bit
 * patterns: a relative bias below T / 2^64 (~2^-24 of one Q40 unit).
 */
#ifndef QWEN3_BPF_DRAW_H
#define QWEN3_BPF_DRAW_H

#include "numerics.h"

#define QN_PHILOX_M0 0xD2511F53u /* Random123's multipliers and Weyl key increments */
#define QN_PHILOX_M1 0xCD9E8D57u
#define QN_PHILOX_W0 0x9E3779B9u
#define QN_PHILOX_W1 0xBB67AE85u
#define QN_PHILOX_ROUNDS 10
#define QN_DRAW_STREAM 0x73616d70u /* counter word 2: "samp", room for other streams */

struct qn_philox_ctr {
  qn_u32 c0, c1, c2, c3;
};

/* One round: two 32x32 -> 64 products, their halves swapped and xored. */
QN_INLINE struct qn_philox_ctr qn_philox_round(struct qn_philox_ctr x, qn_u32 k0, qn_u32 k1) {
  qn_u64 p0 = (qn_u64)QN_PHILOX_M0 * x.c0;
  qn_u64 p1 = (qn_u64)QN_PHILOX_M1 * x.c2;
  struct qn_philox_ctr y;
  y.c0 = (qn_u32)(p1 >> 32) ^ x.c1 ^ k0;
  y.c1 = (qn_u32)p1;
  y.c2 = (qn_u32)(p0 >> 32) ^ x.c3 ^ k1;
  y.c3 = (qn_u32)p0;
  return y;
}

/* Philox4x32-10 of counter x under key (k0, k1); the key is bumped between rounds. */
QN_INLINE struct qn_philox_ctr qn_philox4x32_10(struct qn_philox_ctr x, qn_u32 k0, qn_u32 k1) {
#ifndef __cplusplus
#pragma unroll
#endif
  for (int r = 0; r < QN_PHILOX_ROUNDS; r++) {
    x = qn_philox_round(x, k0, k1);
    k0 += QN_PHILOX_W0;
    k1 += QN_PHILOX_W1;
  }
  return x;
}

/* The 64 uniform bits of draw `index` of a request seeded `seed`. */
QN_INLINE qn_u64 qn_draw_bits(qn_u64 seed, qn_u64 index) {
  struct qn_philox_ctr x;
  x.c0 = (qn_u32)index;
  x.c1 = (qn_u32)(index >> 32);
  x.c2 = QN_DRAW_STREAM;
  x.c3 = 0;
  x = qn_philox4x32_10(x, (qn_u32)seed, (qn_u32)(seed >> 32));
  return ((qn_u64)x.c0 << 32) | x.c1;
}

/* The point r in [0, total) the bits pick: floor(bits * total / 2^64). */
QN_INLINE qn_u64 qn_draw_point(qn_u64 bits, qn_u64 total) { return qn_mulhi_u64(bits, total); }

#endif
