/* The matmul family's q8 step over several positions (the _pre programs):
 * a pass's positions in blocks of QN_Q8_PBLK; one step is a block of 8 rows
 * against a block of positions: each row's code bytes are loaded once for
 * the block's positions, whose inputs are packed in pairs into 64-bit
 * operands (layout.h, ops_q8multi.h). Same integers as mm_block_pos. A part
 * of ops_matmul.h, which includes it after mm_block_finish.
 */
#ifndef QWEN3_BPF_OPS_MATMUL_Q8M_H
#define QWEN3_BPF_OPS_MATMUL_Q8M_H

static __always_inline u64 *xq_xp(u32 thread) {
  s32 *b = buf_lookup(&xq_buf, thread);
  if (!b) return 0;
  return (u64 *)(b + qn_xq_xp_off(IN_PAD));
}

/* the block sums [QN_Q8_PBLK][8] (position m's 8 rows: a struct qn_dot8) */
static __always_inline s64 *xq_ymulti(u32 thread) {
  s32 *b = buf_lookup(&xq_buf, thread);
  if (!b) return 0;
  return (s64 *)(b + qn_xq_ysum_off(IN_PAD));
}

struct pack_state {
  u32 thread, n, chunks; /* compact positions, 8-column chunks of the op's input */
};

/* Iteration i = (pair of compact positions over all blocks, chunk of 8
 * columns): the packed inputs x[2qq] + x[2qq + 1] * 2^32, once per pass. */
static long mm_pack_cb(u64 i, void *ctx) {
  struct pack_state *st = ctx;
  u32 chunks = st->chunks;
  if (chunks == 0 || chunks > IN_PAD / 8) return qn_fail(st->thread, __LINE__);
  u32 qq = (u32)i / chunks;
  u32 e = ((u32)i - qq * chunks) * 8;
  u32 c0 = 2 * qq;
  s32 *x0 = xq_row(st->thread, c0);
  s32 *x1 = xq_row(st->thread, c0 + 1);
  u64 *xp = xq_xp(st->thread);
  if (!x0 || !x1 || !xp || e > IN_PAD - 8) return qn_fail(st->thread, __LINE__);
  u64 m0 = c0 < st->n ? ~0ULL : 0, m1 = c0 + 1 < st->n ? ~0ULL : 0; /* positions past the pass: 0 */
  u32 base = qn_xq_xp_idx(IN_PAD, qq / (QN_Q8_PBLK / 2), e, qq % (QN_Q8_PBLK / 2));
  QN_BARRIER(base);
  if (base > (QN_PMAX / QN_Q8_PBLK) * IN_PAD * (QN_Q8_PBLK / 2) - 1 - 7 * (QN_Q8_PBLK / 2)) /* the 8th store's */
    return qn_fail(st->thread, __LINE__);
#pragma unroll
  for (int k = 0; k < 8; k++)
    xp[base + k * (QN_Q8_PBLK / 2)] = ((u64)(s64)x0[e + k] & m0) + (((u64)x1[e + k] & m1) << 32);
  return 0;
}

/* Small: it sits in a frame of the three that share BPF's 512-byte stack;
 * the callback finds the worker's scratch from the xq entry. */
struct q8m_ctx {
  const QN_WQ u8 *w; /* the block of rows */
  s32 *xq;           /* the worker's xq_buf entry (layout.h) */
  u32 pb;            /* the position block */
  u32 np;            /* pairs to compute: 4, 2 or 1 (the block's positions / 2, rounded up to these) */
};

/* log2 of the pairs a call computes for np pairs: 4 -> 2, 2 -> 1, 1 -> 0 */
static __always_inline u32 q8m_log_pairs(u32 np) { return np == 4 ? 2 : np == 2 ? 1 : 0; }

/* Iteration i = (group g, rows j0..): 4 / np rows of the block against the
 * np pairs of the position block (4 sums: sum a is row j0 + a / np, pair
 * a % np), then each position's exact group sum meets its row's group scale. */
static long mm_q8m_cb(u64 i, void *ctx) {
  struct q8m_ctx *gc = ctx;
  u32 lp = q8m_log_pairs(gc->np);
  u32 sh = lp + 1; /* calls per group: 8 / (4 / np) = 2 np */
  u32 g = (u32)i >> sh;
  u32 j0 = ((u32)i & ((1u << sh) - 1)) << (2 - lp);
  QN_BARRIER(g);
  QN_BARRIER(j0);
  if (g >= IN_PAD / QN_GROUP || j0 >= QN_Q8_BLOCK_ROWS) return 1;
  /* j0 is added after a barrier: clang would otherwise fold the add into an
   * or (the group offset's low bits are zero), whose bounds the verifier
   * widens past the weight entry */
  u32 ob = qn_q8_bcol_off(g, 0);
  QN_BARRIER(ob);
  ob += j0;
  /* the 4 sums go to the map (after the block sums), not the stack: three
   * frames share BPF's 512 bytes */
  u32 pb = gc->pb & (QN_PMAX / QN_Q8_PBLK - 1);
  u64 *t = (u64 *)(gc->xq + qn_xq_ysum_off(IN_PAD)) + QN_Q8_PBLK * QN_Q8_BLOCK_ROWS;
  const u64 *px = (const u64 *)(gc->xq + qn_xq_xp_off(IN_PAD)) + pb * IN_PAD * (QN_Q8_PBLK / 2) +
                  g * QN_GROUP * (QN_Q8_PBLK / 2);
  if (lp == 2)
    q8m_asm_1x4(gc->w + ob, px, t);
  else if (lp == 1)
    q8m_asm_2x2(gc->w + ob, px, t);
  else
    q8m_asm_4x1(gc->w + ob, px, t);
  /* read after the asm (its memory clobber forces the reloads), as mm_q8_group_cb */
  pb = gc->pb & (QN_PMAX / QN_Q8_PBLK - 1);
  const s32 *xs = gc->xq + qn_xq_gsum_off(IN_PAD, pb * QN_Q8_PBLK);
  s64 *y = (s64 *)(gc->xq + qn_xq_ysum_off(IN_PAD));
  t = (u64 *)(y + QN_Q8_PBLK * QN_Q8_BLOCK_ROWS);
  lp = q8m_log_pairs(gc->np);
  u32 gs = IN_PAD / QN_GROUP, npm = gc->np - 1;
#pragma unroll
  for (u32 a = 0; a < 4; a++) {
    u32 j = (j0 + (a >> lp)) & (QN_Q8_BLOCK_ROWS - 1), q = a & npm & 3;
    u32 os = qn_q8_bscale_off(g, 0);
    QN_BARRIER(os);
    os += QN_Q8_SCALE_BYTES * j;
    s64 sc = *(const QN_WQ s32 *)(gc->w + os);
    s64 lo, hi;
    q8m_lanes(t[a], (s64)xs[(2 * q) * gs + g] * QN_Q8_CODE_BIAS, (s64)xs[(2 * q + 1) * gs + g] * QN_Q8_CODE_BIAS,
              &lo, &hi);
    y[(2 * q) * QN_Q8_BLOCK_ROWS + j] += lo * sc;
    y[(2 * q + 1) * QN_Q8_BLOCK_ROWS + j] += hi * sc;
  }
  return 0;
}

/* Step i = (block of rows, block of positions, part): part 0 computes the
 * block's sums for the position block; part 1 + m finishes position m of it
 * (outlier columns and outputs, as mm_block_pos). The parts are iterations
 * of one loop, not a nested one, so the finish's calls (qn_topk_update) stay
 * within BPF's 512 bytes of stack over all frames. */
#define QN_Q8M_PARTS (1 + QN_Q8_PBLK)
static __always_inline long mm_multi_step(u64 i, void *ctx, int cls) {
  struct mm_state *st = ctx;
  u32 npb = st->npb, n = st->ncomp;
  if (npb == 0 || npb > QN_PMAX / QN_Q8_PBLK || n > QN_PMAX) return qn_fail(st->thread, __LINE__);
  u32 k = (u32)i / QN_Q8M_PARTS;
  u32 part = (u32)i - k * QN_Q8M_PARTS;
  u32 step = k / npb;
  u32 pb = k - step * npb;
  u32 r = st->row_begin + step * st->row_step;
  u32 op = st->op;
  QN_BARRIER(op);
  const QN_WQ u8 *w = mm_block_unit(st, op, r, cls, QN_Q8_BLOCK_ROWS);
  s64 *y = xq_ymulti(st->thread);
  if (!w || !y || pb >= QN_PMAX / QN_Q8_PBLK) return qn_fail(st->thread, __LINE__);
  if (part > 0) {
    u32 m = part - 1, c = pb * QN_Q8_PBLK + part - 1;
    if (c >= n) return 0;
    QN_BARRIER(m);
    if (m >= QN_Q8_PBLK) return qn_fail(st->thread, __LINE__);
    u32 e = mm_block_finish(st, r, c, w, y + m * QN_Q8_BLOCK_ROWS, cls, QN_PREC_Q8);
    return e ? qn_fail(st->thread, e) : 0;
  }
  s32 *xq = buf_lookup(&xq_buf, st->thread);
  if (!xq) return qn_fail(st->thread, __LINE__);
#pragma unroll
  for (int j = 0; j < QN_Q8_PBLK * QN_Q8_BLOCK_ROWS; j++) y[j] = 0;
  u32 cnt = n - pb * QN_Q8_PBLK; /* >= 1: npb is rounded up from n */
  struct q8m_ctx gc = {w, xq, pb, cnt > 4 ? 4 : cnt > 2 ? 2 : 1};
  bpf_loop(mm_groups(op, cls) * 2 * gc.np, mm_q8m_cb, &gc, 0); /* 2 np calls per group (mm_q8m_cb) */
  return 0;
}
static long mm_multi_cb_normed(u64 i, void *ctx) { return mm_multi_step(i, ctx, QN_MM_NORMED); }
static long mm_multi_cb_proj(u64 i, void *ctx) { return mm_multi_step(i, ctx, QN_MM_PROJ); }

#endif
