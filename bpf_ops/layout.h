/* The layout contract across the kernel boundary: the only place that says
 * how a converted weight row, the q8 outlier tail, the per-worker scratch
 * (matmul input, attention), a KV cache entry and every map value are laid
 * out in bytes. Compiles as BPF C (the programs) and as C++ (the loader, the
 * weight conversion, the bit-exact model, the tools), so both sides compute
 * every offset with the same expression.
 */
#ifndef QWEN3_BPF_LAYOUT_H
#define QWEN3_BPF_LAYOUT_H

#include "numerics.h"

#define QN_PMAX 16              /* positions per batched pass over a weight matrix */
#define QN_THREADS_LIMIT 1024   /* worker threads a plan accepts (maps are sized to the real count) */
#define QN_TOPK_MAX 64          /* top-k kept per position and thread */
#define QN_MAX_SESSIONS 1024    /* KV caches alive at once (slots of the outer map) */
#define QN_WENTRY_BYTES (64u << 20) /* one weights-map entry; rows never straddle entries */

/* Which precision the weights were converted to (qn_shape.precision), and
 * the row format of one matrix (qn_matrix.format). A q4 model stores its
 * layers' qkv, o and gate/up matrices as q4 (q4a8 blocks below) and its
 * down, embedding and vocabulary matrices as q8 (docs/numerics.md). */
#define QN_PREC_Q24 0
#define QN_PREC_Q8 1
#define QN_PREC_Q4 2
#define QN_PREC_Q8A8 3 /* a matrix format only (the vocabulary of q8 models), never a model's */

QN_INLINE qn_u64 qn_round8(qn_u64 v) { return (v + 7) & ~(qn_u64)7; }

/* ---- weight rows ------------------------------------------------------------
 * A row is cols_pad = groups * QN_GROUP columns in groups of QN_GROUP:
 *   q24: 64 int32 (w * 2^wfrac) per group
 *   q4 : two halves of QN_Q4_GROUP per group (the q4a8 section below)
 *   q8 : int32 scale, then 64 int8 codes (w = code * scale / 2^wfrac) per
 *        group; after the last group the outlier tail: QN_OUT_COLS int64
 *        (w * 2^wfrac) of the matrix's outlier columns (qn_matrix.ocol), whose
 *        int8 slots are zero. Padding columns are zero. */
#define QN_OUT_COLS 4                          /* q8: columns per matrix kept exact (int64) */
#define QN_Q8_SCALE_BYTES 4
#define QN_Q8_GROUP_BYTES (QN_Q8_SCALE_BYTES + QN_GROUP)
#define QN_Q24_GROUP_BYTES (4 * QN_GROUP)
#define QN_OUT_TAIL_BYTES (8 * QN_OUT_COLS)

QN_INLINE qn_u32 qn_groups_for(qn_u32 cols) { return (cols + QN_GROUP - 1) / QN_GROUP; }
#define QN_Q4_GROUP 32                         /* q4: columns per scale (half a QN_GROUP) */
#define QN_Q4_CODE_BIAS 8
#define QN_Q4_IMG_HALF_BYTES (4 + QN_Q4_GROUP)
#define QN_Q4_IMG_GROUP_BYTES (2 * QN_Q4_IMG_HALF_BYTES)
QN_INLINE qn_u32 qn_group_bytes(qn_u32 precision) {
  return precision == QN_PREC_Q8 || precision == QN_PREC_Q8A8 ? QN_Q8_GROUP_BYTES : precision == QN_PREC_Q4 ? QN_Q4_IMG_GROUP_BYTES : QN_Q24_GROUP_BYTES;
}
/* Byte offset of group g in a row. */
QN_INLINE qn_u32 qn_group_off(qn_u32 precision, qn_u32 g) { return g * qn_group_bytes(precision); }
/* q8: byte offset of the outlier tail (int64 [QN_OUT_COLS]) in a row of `groups` groups. */
QN_INLINE qn_u32 qn_q8_tail_off(qn_u32 groups) { return groups * QN_Q8_GROUP_BYTES; }
/* outlier column k's int64 weight in a q8 row image's tail */
QN_INLINE qn_u32 qn_q8_tail_elem_off(qn_u32 groups, qn_u32 k) { return qn_q8_tail_off(groups) + 8 * k; }
/* one row image (what the conversion produces); q24, q8 and q4 rows all end in
 * their groups, q8 and q4 then in the outlier tail */
QN_INLINE qn_u32 qn_row_bytes(qn_u32 precision, qn_u32 groups) {
  return precision == QN_PREC_Q24 ? groups * QN_Q24_GROUP_BYTES : qn_group_off(precision, groups) + QN_OUT_TAIL_BYTES;
}

/* ---- stored weights: units of rows ------------------------------------------
 * q24 stores each row as above (a unit is one row). q8 stores the rows above
 * (the "row image": what the conversion produces and the C++ model reads)
 * interleaved in blocks of QN_Q8_BLOCK_ROWS, so that one 64-bit load per
 * column feeds eight rows (ops_weights.h dot8_q8). Block b holds rows
 * 8b .. 8b+7; a matrix's last block is padded with rows of code 0, scale 0:
 *   per group g: int32 scale [8] (row j), then per column k one u64 whose
 *                byte j is row j's code + 128 (offset binary, 1 .. 255, so
 *                masking out a byte never borrows from its neighbour);
 *   after the last group the outlier tails: int64 [8][QN_OUT_COLS].
 * A block is exactly 8 row images long. qn_matrix.row_bytes, rows_per_entry
 * and row_skip count units (q24 row, q8 or q4 block); a unit never
 * straddles a weights-map entry. */
#define QN_Q8_BLOCK_ROWS 8
#define QN_Q8_CODE_BIAS 128
#define QN_Q8_BSCALES_BYTES (QN_Q8_SCALE_BYTES * QN_Q8_BLOCK_ROWS)
#define QN_Q8_BGROUP_BYTES (QN_Q8_BSCALES_BYTES + QN_GROUP * QN_Q8_BLOCK_ROWS)
QN_INLINE qn_u32 qn_q8_bscale_off(qn_u32 g, qn_u32 j) { return g * QN_Q8_BGROUP_BYTES + QN_Q8_SCALE_BYTES * j; }
/* the u64 of column k of group g; row j is its byte j */
QN_INLINE qn_u32 qn_q8_bcol_off(qn_u32 g, qn_u32 k) {
  return g * QN_Q8_BGROUP_BYTES + QN_Q8_BSCALES_BYTES + k * QN_Q8_BLOCK_ROWS;
}
QN_INLINE qn_u32 qn_q8_btail_off(qn_u32 groups, qn_u32 j) { return groups * QN_Q8_BGROUP_BYTES + j * QN_OUT_TAIL_BYTES; }

/* ---- q4 weights x 8-bit activations (q4a8) ---------------------------------
 * The row image of a q4 row: per group of QN_GROUP columns, two halves of
 * QN_Q4_GROUP columns, each an int32 scale then 32 codes c (0 .. 15, one
 * byte each; w = (c - QN_Q4_CODE_BIAS) * scale / 2^wfrac); after the last
 * group the outlier tail as in q8 (int64 [QN_OUT_COLS], their code slots 8).
 * Stored, a unit is a block of QN_Q4_BLOCK_ROWS rows; per half-group gq
 * (= 2 g + h) of QN_Q4_GROUP columns:
 *   int32 scale [16] (row j), uint16 code sum [16] (row j's 32 codes), then
 *   per column k one u64 whose nibble j is row j's code c;
 * after the last half-group the outlier tails int64 [16][QN_OUT_COLS]. A
 * matrix's last block is padded with rows of code 8, scale 0.
 * The input of a q4a8 product is quantized per group of QN_A8_GROUP values
 * (kernel_q4a8.h): q = round(127 x / max|x|) stored as the byte q + 128,
 * the group's scale xs = round(max|x| 2^16 / 127) (|x| <= 2^QN_Q8_ACT_BITS)
 * and its correction 8 * sum q. */
#define QN_Q4_BLOCK_ROWS 16
/* row image: the scale of half h of group g; its codes follow it */
QN_INLINE qn_u32 qn_q4_img_half_off(qn_u32 g, qn_u32 h) { return g * QN_Q4_IMG_GROUP_BYTES + h * QN_Q4_IMG_HALF_BYTES; }
QN_INLINE qn_u32 qn_q4_tail_off(qn_u32 groups) { return groups * QN_Q4_IMG_GROUP_BYTES; }
#define QN_Q4_BSCALES_BYTES (4 * QN_Q4_BLOCK_ROWS)
#define QN_Q4_BCSUM_BYTES (2 * QN_Q4_BLOCK_ROWS)
#define QN_Q4_BGROUP_BYTES (QN_Q4_BSCALES_BYTES + QN_Q4_BCSUM_BYTES + 8 * QN_Q4_GROUP)
/* stored block: offsets by half-group gq */
QN_INLINE qn_u32 qn_q4_bscale_off(qn_u32 gq, qn_u32 j) { return gq * QN_Q4_BGROUP_BYTES + 4 * j; }
QN_INLINE qn_u32 qn_q4_bcsum_off(qn_u32 gq, qn_u32 j) { return gq * QN_Q4_BGROUP_BYTES + QN_Q4_BSCALES_BYTES + 2 * j; }
QN_INLINE qn_u32 qn_q4_bcol_off(qn_u32 gq, qn_u32 k) {
  return gq * QN_Q4_BGROUP_BYTES + QN_Q4_BSCALES_BYTES + QN_Q4_BCSUM_BYTES + 8 * k;
}
QN_INLINE qn_u32 qn_q4_btail_off(qn_u32 groups, qn_u32 j) {
  return 2 * groups * QN_Q4_BGROUP_BYTES + j * QN_OUT_TAIL_BYTES;
}
#define QN_A8_GROUP 32
#define QN_A8_BIAS 128
#define QN_A8_SCALE_FRAC 16

/* ---- q8 weights x 8-bit activations in 21-bit lanes (q8a8) ------------------
 * The vocabulary projection of q8 models (qn_op_format). A row image
 * is a q8 row image; stored, a unit is a block of QN_Q8A8_BLOCK_ROWS rows;
 * per group g of QN_GROUP columns: int32 scale [12] (row j), then per half h
 * (QN_A8_GROUP columns: one input group) u64 start [4] (accumulator a's start
 * value: numerics_q8a8.h), then per column k two u64 words; word w holds rows
 * 6w .. 6w+5 as V = w0 | w3 << 8 | w1 << 21 | w4 << 29 | w2 << 42 | w5 << 50
 * (w = code + 128, row j at bit qn_q8a8_code_shift(j)). After the last group
 * the outlier tails int64 [12][QN_OUT_COLS], as in q8. A matrix's last block
 * is padded with rows of code 0, scale 0. */
#define QN_Q8A8_BLOCK_ROWS 12
#define QN_Q8A8_WORDS 2      /* u64 per column */
#define QN_Q8A8_ACCS 4       /* accumulators per block (3 rows each) */
#define QN_Q8A8_LANE_BITS 21
#define QN_Q8A8_LANE_MASK 0x1FFFFFULL
#define QN_Q8A8_LANE_BIAS (1LL << 20)
#define QN_Q8A8_LANE_ONES 0x40000200001ULL /* 1 + 2^21 + 2^42 */
#define QN_Q8A8_CODES 0x3FC001FE000FFULL   /* 0xFF in each lane */
#define QN_Q8A8_HIGH_SHIFT 8                /* the second code of a lane */

#define QN_Q8A8_BSCALES_BYTES (4 * QN_Q8A8_BLOCK_ROWS)
#define QN_Q8A8_BSTARTS_BYTES (8 * QN_Q8A8_ACCS)
#define QN_Q8A8_BCOL_BYTES (8 * QN_Q8A8_WORDS)
#define QN_Q8A8_BHALF_BYTES (QN_Q8A8_BSTARTS_BYTES + QN_A8_GROUP * QN_Q8A8_BCOL_BYTES)
#define QN_Q8A8_BGROUP_BYTES (QN_Q8A8_BSCALES_BYTES + (QN_GROUP / QN_A8_GROUP) * QN_Q8A8_BHALF_BYTES)

QN_INLINE qn_u32 qn_q8a8_bscale_off(qn_u32 g, qn_u32 j) { return g * QN_Q8A8_BGROUP_BYTES + 4 * j; }
/* half h of group g: its start values, then its columns */
QN_INLINE qn_u32 qn_q8a8_bhalf_off(qn_u32 g, qn_u32 h) {
  return g * QN_Q8A8_BGROUP_BYTES + QN_Q8A8_BSCALES_BYTES + h * QN_Q8A8_BHALF_BYTES;
}
QN_INLINE qn_u32 qn_q8a8_bstart_off(qn_u32 g, qn_u32 h, qn_u32 a) { return qn_q8a8_bhalf_off(g, h) + 8 * a; }
/* word w of column k (0 .. QN_A8_GROUP - 1) of half h of group g */
QN_INLINE qn_u32 qn_q8a8_bword_off(qn_u32 g, qn_u32 h, qn_u32 k, qn_u32 w) {
  return qn_q8a8_bhalf_off(g, h) + QN_Q8A8_BSTARTS_BYTES + k * QN_Q8A8_BCOL_BYTES + 8 * w;
}

/* Row j of a block: its accumulator, lane, word and bit position in the word. */
QN_INLINE qn_u32 qn_q8a8_acc(qn_u32 j) { return j / 3; }
QN_INLINE qn_u32 qn_q8a8_lane(qn_u32 j) { return j % 3; }
QN_INLINE qn_u32 qn_q8a8_word(qn_u32 j) { return j / 6; }
QN_INLINE qn_u32 qn_q8a8_code_shift(qn_u32 j) {
  return QN_Q8A8_LANE_BITS * qn_q8a8_lane(j) + QN_Q8A8_HIGH_SHIFT * (qn_q8a8_acc(j) % 2);
}
QN_INLINE qn_u32 qn_q8a8_btail_off(qn_u32 groups, qn_u32 j) {
  return groups * QN_Q8A8_BGROUP_BYTES + j * QN_OUT_TAIL_BYTES;
}

QN_INLINE qn_u32 qn_unit_rows(qn_u32 precision) {
  return precision == QN_PREC_Q8 ? QN_Q8_BLOCK_ROWS
         : precision == QN_PREC_Q4 ? QN_Q4_BLOCK_ROWS
         : precision == QN_PREC_Q8A8 ? QN_Q8A8_BLOCK_ROWS : 1;
}
QN_INLINE qn_u32 qn_unit_bytes(qn_u32 precision, qn_u32 groups) {
  if (precision == QN_PREC_Q4) return qn_q4_btail_off(groups, QN_Q4_BLOCK_ROWS);
  if (precision == QN_PREC_Q8A8) return qn_q8a8_btail_off(groups, QN_Q8A8_BLOCK_ROWS);
  return qn_row_bytes(precision, groups) * qn_unit_rows(precision);
}
QN_INLINE qn_u32 qn_units_for(qn_u32 precision, qn_u32 rows) {
  return (rows + qn_unit_rows(precision) - 1) / qn_unit_rows(precision);
}

/* ---- per-worker matmul input (xq_buf, one entry per worker), int32 units ----
 * inputs [QN_PMAX][in_pad] s32 | shifts [QN_PMAX] s32 |
 * q8 group sums [QN_PMAX][in_pad / QN_GROUP] s32 (sum of a group's inputs:
 * the offset-binary correction of dot8_q8) | q8 block sums s64
 * [QN_Q8_PBLK][8] (the block being computed, per position of a position
 * block: scratch in the map, not on the 512-byte BPF stack; the one-position
 * kernel uses the first 8), then the multi-position kernel's 4 lane sums u64 [4] |
 * q8 packed inputs u64
 * [QN_PMAX / QN_Q8_PBLK][in_pad][QN_Q8_PBLK / 2] (the multi-position kernel,
 * ops_q8multi.h q8m_asm_*: position block b, column k, pair q holds
 * x[8b + 2q][k] + x[8b + 2q + 1][k] * 2^32 mod 2^64, compact positions past
 * the pass's count as 0). q4 matrices reuse the packed inputs' space for
 * their 8-bit inputs (the multi-position kernel never runs on them):
 * codes u8 [QN_PMAX][in_pad] (q + 128), then per position and group of
 * QN_A8_GROUP the pair (xs, corr) s64 [QN_PMAX][in_pad / QN_A8_GROUP][2] */
#define QN_Q8_PBLK 8 /* positions per block of the multi-position q8 kernel (4 lane pairs) */
QN_INLINE qn_u32 qn_xq_row_off(qn_u32 in_pad, qn_u32 c) { return c * in_pad; }
QN_INLINE qn_u32 qn_xq_shift_off(qn_u32 in_pad, qn_u32 c) { return QN_PMAX * in_pad + c; }
QN_INLINE qn_u32 qn_xq_gsum_off(qn_u32 in_pad, qn_u32 c) {
  return QN_PMAX * in_pad + QN_PMAX + c * (in_pad / QN_GROUP);
}
/* even, so 8-aligned */
QN_INLINE qn_u32 qn_xq_ysum_off(qn_u32 in_pad) { return (qn_xq_gsum_off(in_pad, QN_PMAX) + 1) & ~1u; }
/* the packed inputs, in int32 units (even: 8-aligned) */
QN_INLINE qn_u32 qn_xq_xp_off(qn_u32 in_pad) { return qn_xq_ysum_off(in_pad) + 2 * (QN_Q8_PBLK * QN_Q8_BLOCK_ROWS + 4); }
/* u64 index of (position block b, column k, pair q) from the packed inputs' start */
QN_INLINE qn_u32 qn_xq_xp_idx(qn_u32 in_pad, qn_u32 b, qn_u32 k, qn_u32 q) {
  return (b * in_pad + k) * (QN_Q8_PBLK / 2) + q;
}
/* q4: byte offsets from the xq entry of position c's 8-bit codes and of its
 * groups' (xs, corr) pairs; 24 in_pad bytes in all, within the packed inputs' 64 in_pad */
QN_INLINE qn_u32 qn_xq_a8_code_off(qn_u32 in_pad, qn_u32 c) { return qn_xq_xp_off(in_pad) * 4 + c * in_pad; }
QN_INLINE qn_u32 qn_xq_a8_scale_off(qn_u32 in_pad, qn_u32 c) {
  return qn_xq_a8_code_off(in_pad, QN_PMAX) + c * (in_pad / QN_A8_GROUP) * 16;
}
QN_INLINE qn_u64 qn_xq_bytes(qn_u32 in_pad) {
  return qn_round8((qn_u64)qn_xq_xp_off(in_pad) * 4 + (qn_u64)(QN_PMAX / QN_Q8_PBLK) * in_pad * QN_Q8_PBLK * 4);
}

/* ---- per-worker attention scratch (att_buf), bytes ---------------------------
 * For the G query heads of one kv head's group:
 * scores [G][max_ctx] s32 | acc [G][hd] s64 | q [G][hd] s32 | tmp0, tmp1 [hd] s32 | heads [G] */
struct qn_att_head {
  qn_s64 smax; /* softmax: largest score */
  qn_u64 sum;  /* softmax: sum of exp weights */
  qn_s64 sq;   /* query shift */
  qn_s64 lb;   /* kv8: log2 of the Hadamard block */
  qn_s64 voct; /* kv8: largest V scale octave over the cached positions */
  qn_u64 inv;  /* kv8: qn_kv8_prob_inv(sum), once the sum is complete */
};
QN_INLINE qn_u32 qn_att_scores_off(qn_u32 g, qn_u32 ctx, qn_u32 hd, qn_u32 j) { return j * ctx * 4; }
QN_INLINE qn_u32 qn_att_acc_off(qn_u32 g, qn_u32 ctx, qn_u32 hd, qn_u32 j) { return g * ctx * 4 + j * hd * 8; }
QN_INLINE qn_u32 qn_att_q_off(qn_u32 g, qn_u32 ctx, qn_u32 hd, qn_u32 j) {
  return g * (ctx * 4 + hd * 8) + j * hd * 4;
}
QN_INLINE qn_u32 qn_att_tmp0_off(qn_u32 g, qn_u32 ctx, qn_u32 hd) { return g * (ctx * 4 + hd * 12); }
QN_INLINE qn_u32 qn_att_tmp1_off(qn_u32 g, qn_u32 ctx, qn_u32 hd) { return qn_att_tmp0_off(g, ctx, hd) + hd * 4; }
QN_INLINE qn_u32 qn_att_heads_off(qn_u32 g, qn_u32 ctx, qn_u32 hd) { return qn_att_tmp0_off(g, ctx, hd) + hd * 8; }
QN_INLINE qn_u64 qn_att_bytes(qn_u32 g, qn_u32 ctx, qn_u32 hd) {
  return qn_round8((qn_u64)qn_att_heads_off(g, ctx, hd) + (qn_u64)g * sizeof(struct qn_att_head));
}

/* ---- a session's KV cache (kv_inner_map), bytes ----------------------------------
 * One entry holds QN_KV_BLOCK consecutive positions of one kv head of one
 * layer, so a pass over the cache reads each head's records contiguously (the
 * hardware prefetcher follows it) with one map lookup per block of positions.
 * Entries are keyed block-major (qn_kv_key): a cache of n positions needs the
 * first qn_kv_entries(n) keys. One record (position) of one kv head:
 *   int16 (kv_bytes 2): K [hd] s16 | V [hd] s16 | kmax s32 | vmax s32;
 *   compact (kv_bytes 1): the K|V words [hd] s16 only (scale codes in-band,
 *   numerics.h), so K and V share the offset. docs/kv-cache.md. */
#define QN_KV_BLOCK 32 /* positions per entry: a power of two, a multiple of the attention chunk */
QN_INLINE qn_u32 qn_kv_vec_bytes(qn_u32 hd) { return hd * 2; }
QN_INLINE qn_u32 qn_kv_rec_bytes(qn_u32 hd, qn_u32 kv_bytes) { return kv_bytes == 1 ? hd * 2 : hd * 4 + 8; }
QN_INLINE qn_u32 qn_kv_entry_bytes(qn_u32 hd, qn_u32 kv_bytes) { return QN_KV_BLOCK * qn_kv_rec_bytes(hd, kv_bytes); }
QN_INLINE qn_u32 qn_kv_key(qn_u32 n_layers, qn_u32 n_kv, qn_u32 layer, qn_u32 h, qn_u32 pos) {
  return ((pos / QN_KV_BLOCK) * n_layers + layer) * n_kv + h;
}
QN_INLINE qn_u64 qn_kv_entries(qn_u32 n_layers, qn_u32 n_kv, qn_u32 positions) {
  return (qn_u64)((positions + QN_KV_BLOCK - 1) / QN_KV_BLOCK) * n_layers * n_kv;
}
/* the record of position pos inside its entry */
QN_INLINE qn_u32 qn_kv_rec_off(qn_u32 rec_bytes, qn_u32 pos) { return (pos & (QN_KV_BLOCK - 1)) * rec_bytes; }
/* inside one record */
QN_INLINE qn_u32 qn_kv_k_off(void) { return 0; }
QN_INLINE qn_u32 qn_kv_v_off(qn_u32 hd, qn_u32 kv_bytes) { return kv_bytes == 1 ? 0 : qn_kv_vec_bytes(hd); }
QN_INLINE qn_u32 qn_kv_kmax_off(qn_u32 hd) { return 2 * qn_kv_vec_bytes(hd); }
QN_INLINE qn_u32 qn_kv_vmax_off(qn_u32 hd) { return qn_kv_kmax_off(hd) + 4; }

/* ---- map value sizes of the shared buffers (one entry unless stated) ------------ */
/* resid / qkv / attn / mlp: [QN_PMAX][pad] int32 Q16 */
QN_INLINE qn_u64 qn_act_bytes(qn_u32 pad) { return qn_round8((qn_u64)QN_PMAX * pad * 4); }
/* logits of the positions that asked for them: [QN_PMAX][vocab] int32 Q16 */
QN_INLINE qn_u64 qn_logits_bytes(qn_u32 vocab) { return qn_round8((qn_u64)QN_PMAX * vocab * 4); }
QN_INLINE qn_u64 qn_norms_bytes(qn_u32 norms_len) { return qn_round8((qn_u64)norms_len * 4); }
/* RoPE table: per position [hd/2] cos then [hd/2] sin, int32 Q30 */
QN_INLINE qn_u64 qn_rope_bytes(qn_u32 positions, qn_u32 hd) { return qn_round8((qn_u64)positions * hd * 4); }
/* topk_buf entries: one slot per worker and logit position, then QN_PMAX merged slots */
QN_INLINE qn_u32 qn_topk_entries(qn_u32 threads) { return (threads + 1) * QN_PMAX; }
QN_INLINE qn_u32 qn_topk_key(qn_u32 thread, qn_u32 c) { return thread * QN_PMAX + c; }

/* ---- the sampling buffer (sample_buf, one entry; the qn_sample program), bytes ----
 * hdr (struct qn_sample_hdr: parameters in, results out, the program's state) |
 * hist [256] u64 (radix-select histogram) | topk (struct qn_topk_slot: the
 * top-k list of k <= QN_TOPK_MAX, ids = candidate indices) | cand [vocab] (id, Q16 logit) in |
 * seen [ceil(vocab / 32)] u32 bitmap of the history's ids | out [vocab]
 * struct qn_sample_entry (kept ids, Q40 probabilities). With QN_SAMPLE_DRAW
 * the program also picks one kept id by the seeded draw (draw.h) of
 * (seed, draw_index): drawn_id. With QN_SAMPLE_LSE the program reads only n,
 * flags and cand (or the logits row), and writes only lse_q16 (kept 0): the log-normalizer of the
 * reported logprobs. */
#define QN_SAMPLE_MAX (1u << 18)      /* candidates: keeps the weight sums below 2^62 */
#define QN_SAMPLE_GREEDY 1u           /* flags: the penalised argmax only */
#define QN_SAMPLE_PENALTY 2u          /* flags: apply the repetition penalty to seen ids */
#define QN_SAMPLE_LSE 4u              /* flags, alone or with LOGITS: only lse_q16 of the candidates (T = 1, no cut) */
#define QN_SAMPLE_DRAW 8u             /* flags: also pick the token (drawn_id) by the seeded draw */
#define QN_SAMPLE_LOGITS 16u          /* flags: cand is logits_buf's row `row` (ids 0..vocab-1, n = vocab), read in the kernel */
struct qn_sample_hdr {
  /* in (user space) */
  qn_u32 n;         /* candidates, <= min(vocab, QN_SAMPLE_MAX) */
  qn_u32 top_k;     /* 0 or >= n: no top-k cut */
  qn_u32 flags;     /* QN_SAMPLE_* */
  qn_u32 tm;        /* temperature = tm * 2^-te, tm in [2^31, 2^32) */
  qn_s32 te;
  qn_u32 pm;        /* penalty = pm * 2^-pe, pm in [2^23, 2^24), pe <= 32 */
  qn_u32 pe;
  qn_u32 row;       /* QN_SAMPLE_LOGITS: the logits row (< QN_PMAX) the forward pass left */
  qn_u64 min_p_q44; /* min_p * 2^44 (< 2^44) */
  qn_u64 top_p_q32; /* top_p * 2^32, in [1, 2^32]; 2^32: no top-p cut */
  qn_u64 seed;      /* QN_SAMPLE_DRAW: the request's seed */
  qn_u64 draw_index; /* QN_SAMPLE_DRAW: tokens the request chose before this one (draw.h) */
  /* out */
  qn_u32 kept;      /* entries of out */
  qn_s32 err;       /* first failed check (source line), 0 ok */
  qn_s64 lse_q16;   /* QN_SAMPLE_LSE: max + ln(sum exp(l - max)) of the candidates, Q16 (qn_lse_q16) */
  qn_s32 drawn_id;  /* QN_SAMPLE_DRAW: the token picked, -1 on an error */
  qn_u32 drawn_i;   /* its entry of out */
  qn_u64 draw_bits; /* QN_SAMPLE_DRAW: qn_draw_bits(seed, draw_index) */
  /* the program's state across its loops */
  qn_s32 best_l;    /* best penalised logit */
  qn_u32 best_i;    /* its candidate index (the first among equals) */
  qn_u64 cm;        /* temperature factor (qn_temp_factor) */
  qn_s32 csh;
  qn_u32 m;         /* entries of out after the weight pass */
  qn_u64 W;         /* sum of weights in the top-k set */
  qn_u64 Wk;        /* sum of weights kept */
  qn_u64 prefix, acc, target; /* radix select: digits so far, mass below them, mass wanted */
  qn_u32 found, pad2;
  qn_u64 tie_run;   /* mass of equal keys already taken */
  qn_u64 k_key, k_acc, k_target; /* top-k threshold key, count below it, k */
  qn_u32 k_on, p_on;
  qn_u32 k_list;    /* top-k by the insertion list (k <= QN_TOPK_MAX) */
  qn_u32 pad3;
  qn_u64 p_key, p_acc, p_target; /* top-p threshold key, mass below it, target */
  qn_u64 d;         /* reciprocal of Wk's top 32 bits (qn_prob_recip) */
  qn_s32 s;
  qn_u32 pad1;
  qn_u64 Pk;        /* sum of the kept Q40 probabilities (the draw's total) */
  qn_u64 draw_r, draw_acc; /* the draw's point in [0, Pk) and the mass walked so far */
};
struct qn_sample_entry {
  qn_s32 id;
  qn_s32 logit;     /* penalised, Q16 */
  qn_u64 w;         /* weight (Q44); after the last pass the probability (Q40) */
};
/* The order every cut follows: logit descending; equal logits in candidate order. */
QN_INLINE qn_u32 qn_sample_key(qn_s32 l) { return (qn_u32)(2147483647LL - (qn_s64)l); }
QN_INLINE qn_u32 qn_sample_hist_off(void) { return qn_round8(sizeof(struct qn_sample_hdr)); }
#define QN_TOPK_SLOT_BYTES (16 + 8 * QN_TOPK_MAX) /* sizeof(struct qn_topk_slot), op_args.h */
QN_INLINE qn_u32 qn_sample_topk_off(void) { return qn_sample_hist_off() + 256 * 8; }
QN_INLINE qn_u32 qn_sample_cand_off(void) { return qn_sample_topk_off() + QN_TOPK_SLOT_BYTES; }
QN_INLINE qn_u32 qn_sample_seen_off(qn_u32 vocab) { return qn_sample_cand_off() + vocab * 8; }
QN_INLINE qn_u32 qn_sample_seen_words(qn_u32 vocab) { return (vocab + 31) / 32; }
QN_INLINE qn_u32 qn_sample_out_off(qn_u32 vocab) {
  return (qn_u32)qn_round8(qn_sample_seen_off(vocab) + qn_sample_seen_words(vocab) * 4);
}
QN_INLINE qn_u64 qn_sample_bytes(qn_u32 vocab) { return qn_sample_out_off(vocab) + (qn_u64)vocab * 16; }

#endif
