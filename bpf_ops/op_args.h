/* What user space and the forward-pass programs share: the model shape set
 * into .rodata before load and the argument block passed as ctx_in of every
 * BPF_PROG_TEST_RUN (byte layouts: layout.h). Compiles as BPF C and
 * as C++ (the engine and the tests include it).
 */
#ifndef QWEN3_BPF_OP_ARGS_H
#define QWEN3_BPF_OP_ARGS_H

#include "layout.h"

/* The model shape and the byte layout of buffers, fixed at load (.rodata). */
struct qn_shape {
  qn_u32 hidden, n_layers, n_heads, n_kv_heads, head_dim, inter, vocab;
  qn_u32 q_dim, kv_dim, qkv_dim;      /* n_heads*hd, n_kv*hd, q_dim + 2*kv_dim */
  qn_u32 precision;                   /* QN_PREC_* */
  qn_u32 max_groups;                  /* largest cols_pad / QN_GROUP of any matrix */
  qn_u32 max_row_bytes;               /* largest row of any matrix */
  qn_u32 max_in;                      /* largest matmul input length (padded) */
  qn_u32 max_ctx;                     /* longest KV cache (positions) */
  qn_u32 kv_rec_bytes;                /* one position of one kv head in a session's cache */
  qn_u32 kv_entry_bytes;              /* one KV map entry: QN_KV_BLOCK records (layout.h) */
  qn_u32 norms_len;                   /* int32 elements in the norms map */
  qn_u32 kv_bytes;                    /* 1: int8 K/V, 2: int16 K/V */
  qn_u32 threads;                     /* worker threads: entries of the per-worker maps */
  qn_u32 tied;                        /* 1: the embedding is the vocabulary matrix (its format too) */
  qn_u64 eps_q32;                     /* rms_norm_eps * 2^32 */
  qn_u64 rope_theta_q16;              /* rope_theta * 2^16 (the RoPE table program) */
};

/* A weight matrix as the programs see it: rows of groups * QN_GROUP columns
 * in the row format of layout.h. */
struct qn_matrix {
  qn_u32 entry0;          /* map path: first weights-map entry */
  qn_u32 rows_per_entry;  /* map path: row slots of row_bytes per entry */
  qn_u32 row_skip;        /* map path: row 0 sits in slot row_skip of entry0 */
  qn_u32 wfrac;           /* fraction bits of the weights (24 / 30, less for |w| >= 128) */
  qn_u32 ocol[QN_OUT_COLS]; /* q8, q4: outlier columns, stored after the groups as int64 w * 2^wfrac
                             * (unused slots: column 0 with weight 0) */
  qn_u32 row_bytes;
  qn_u32 groups;          /* cols_pad / QN_GROUP */
  qn_u32 rows;
  qn_u32 act_bits;        /* input requantization bound (overflow-safe for this matrix) */
  qn_u32 format;          /* QN_PREC_* of these rows (a q4 model mixes q4 and q8) */
  qn_u32 pad;
  qn_u64 arena_off;       /* arena path: byte offset of row 0 */
};

/* Operation kinds of the matmul program family (qn_args.op). */
#define QN_OP_QKV 1     /* rmsnorm(resid) @ Wqkv -> qkv */
#define QN_OP_GATEUP 2  /* rmsnorm(resid) @ Wgu (gate/up rows interleaved) -> silu(g)*u -> mlp */
#define QN_OP_O 3       /* attn @ Wo, resid += */
#define QN_OP_DOWN 4    /* mlp @ Wdown, resid += */
#define QN_OP_VOCAB 5   /* rmsnorm(resid, final) @ Wlm -> logits, argmax, top-k */
#define QN_OP_TOPK_MERGE 6 /* the workers' top-k lists of each logit position -> one (qn_topk_merge) */
#define QN_OP_ROPE 7    /* RoPE table rows [row_begin, row_end) (qn_rope_table) */

/* The row format (QN_PREC_*) of an operation's matrix in a model of
 * precision p: a q4 model keeps down_proj (where 4-bit rounding costs most
 * accuracy) and an untied embedding (op 0 here) at q8; the vocabulary of q8
 * and q4 models is q8a8 (q8 weights against 8-bit inputs), and so is their
 * embedding when tied (docs/numerics.md). The plan (model_plan.cpp) and the
 * programs both ask this. */
QN_INLINE qn_u32 qn_op_format(qn_u32 p, qn_u32 op) {
  /* QKV, GATEUP and O as one range: the verifier then follows one state per
   * format through the matmul program, not one per op */
  if (p == QN_PREC_Q24) return p;
  if (op == QN_OP_VOCAB) return QN_PREC_Q8A8;
  if (p == QN_PREC_Q4) return op - QN_OP_QKV <= QN_OP_O - QN_OP_QKV ? QN_PREC_Q4 : QN_PREC_Q8;
  return p;
}

#ifdef __cplusplus
static_assert(QN_OP_QKV == 1 && QN_OP_GATEUP == 2 && QN_OP_O == 3, "qn_op_format: the q4 ops are one range");
#else
_Static_assert(QN_OP_QKV == 1 && QN_OP_GATEUP == 2 && QN_OP_O == 3, "qn_op_format: the q4 ops are one range");
#endif

/* ctx_in of every program. Small: copied into the kernel on each call. */
struct qn_args {
  struct qn_matrix mat;
  qn_u32 op;
  qn_u32 thread;          /* index of the worker's private scratch */
  qn_u32 row_begin, row_end;
  qn_u32 npos;            /* positions in this pass (<= QN_PMAX) */
  qn_u32 pos0;            /* absolute position of the first one */
  qn_u32 pass_off;        /* attention: pass row of that first position (sessions share a pass) */
  qn_u32 layer;
  qn_u32 kv_slot;         /* attention: the session's slot in the outer KV map */
  qn_u32 kv_positions;    /* attention: that cache's capacity (its entries hold whole blocks) */
  qn_u32 norm_off;        /* int32 offset of this step's norm weights in the norms map */
  qn_u32 norm2_off;       /* attention: k-norm weights (norm_off: q-norm) */
  qn_u32 head_begin, head_end; /* attention: kv heads of this worker */
  qn_u32 pos_mask;        /* vocab: which of the npos positions need logits */
  qn_u32 top_k;           /* vocab: top-k wanted (<= QN_TOPK_MAX) */
  qn_u32 topk_keep;       /* vocab: add to the worker's top-k lists, do not start them (the kernel driver's shares) */
  qn_s32 tokens[QN_PMAX]; /* embed: token ids */
  qn_s32 status;          /* written by the program: 0 ok, <0 error line */
};

/* Per-thread vocabulary results for each position of a pass. */
struct qn_topk_entry {
  qn_s32 id;
  qn_s32 logit; /* Q16 */
};
struct qn_topk_slot {
  qn_s32 argmax_id;
  qn_s32 argmax_logit;
  qn_s32 count;
  qn_s32 pad;
  struct qn_topk_entry e[QN_TOPK_MAX]; /* sorted, best first */
};

/* The sampling probabilities of one position (qn_sample, ops_sample.h): its
 * input, output and state are the sample_buf map (layout.h: qn_sample_*). */
#define QN_OP_SAMPLE 8
#ifdef __cplusplus
static_assert(sizeof(struct qn_topk_slot) == QN_TOPK_SLOT_BYTES, "layout.h: QN_TOPK_SLOT_BYTES");
#else
_Static_assert(sizeof(struct qn_topk_slot) == QN_TOPK_SLOT_BYTES, "layout.h: QN_TOPK_SLOT_BYTES");
#endif

#endif
