/* The kernel driver's interface (docs/kernel-driver.md): what a client writes
 * to start a generation that the kernel runs on its own, the per-operator
 * plan the engine fills once at load, and the record each chosen token
 * appends to the drive_out ring buffer. Compiles as BPF C and as C++ (the
 * engine, the tests; a BPF client program includes it too).
 *
 * A generation: a client fills struct qn_drive_submit (the tokens to feed go
 * into the drive_prompt map first) and runs qn_drive_start with it as ctx
 * (one bpf() call from user space). The program copies it into drive_state
 * and starts the chain of bpf_wq links: each link runs one operator share of
 * the plan (drive_plan[link]) and queues its chain's next link; a second
 * chain on another CPU (qn_drive_join) claims shares of the same operators
 * (compare-and-swap on drive_state.claim); the sample link
 * picks the token, appends a record and either ends the chain (a stop id,
 * max_tokens, the context's end) or starts the next pass. Every link first
 * checks drive_state.cancel: a client sets it (user space through the
 * mmapped map, no bpf() call) and the chain ends within one link with a
 * QN_FINISH_CANCELLED record.
 */
#ifndef QWEN3_BPF_DRIVE_ABI_H
#define QWEN3_BPF_DRIVE_ABI_H

#include "op_args.h"

#define QN_DRIVE_PROMPT_MAX 4096 /* tokens one submission feeds (drive_prompt entries) */
#define QN_DRIVE_STOP_MAX 16     /* stop ids (EOS included) of one submission */
#define QN_DRIVE_CPUS 2          /* chain slots: one wq per (family, CPU slot) */

/* Operator families: one program each (the verifier's 1M budget), each the
 * callback of its own wqs. */
#define QN_FAM_CTL 0  /* embed, top-k merge, sample + stops + record */
#define QN_FAM_MM 1   /* qn_matmul's ops: QKV, GATEUP, VOCAB */
#define QN_FAM_PROJ 2 /* qn_matmul_proj's ops: O, DOWN */
#define QN_FAM_ATT 3  /* qn_attention */
#define QN_FAM_MM4 4  /* a q4 model's q4 ops of qn_matmul: QKV, GATEUP */
#define QN_FAM_VOCAB 5 /* the vocabulary of q8 and q4 models (q8a8): QN_FAM_MM takes the rest */
#define QN_FAM_COUNT 6

/* What a plan link runs (qn_drive_link.kind). */
#define QN_LINK_EMBED 1
#define QN_LINK_MM 2    /* args.op says which */
#define QN_LINK_ATT 3
#define QN_LINK_MERGE 4
#define QN_LINK_SAMPLE 5

/* How the sample link picks (the Sampler's choice of candidates, daemon/sampling). */
#define QN_DRIVE_ARGMAX 0 /* greedy, no penalty: the merged argmax */
#define QN_DRIVE_LIST 1   /* the merged top-k list (top_k <= QN_TOPK_MAX, no penalty) */
#define QN_DRIVE_WHOLE 2  /* the whole vocabulary's logits, in id order */

/* Why a generation ended (qn_drive_record.finish; 0 on every other record). */
#define QN_FINISH_NONE 0
#define QN_FINISH_STOP 1      /* the token is a stop id (EOS included) */
#define QN_FINISH_LENGTH 2    /* max_tokens reached, or the context holds no more */
#define QN_FINISH_CANCELLED 3 /* cancel was set; token -1 */
#define QN_FINISH_ERROR 4     /* an operator rejected its input: status, link; token -1 */

/* One link of the plan (drive_plan, QN_DRIVE_LINKS entries): the argument
 * template of one operator share as the user driver builds it; the link
 * fills in the pass's fields (npos, pos0, tokens, mask, kv slot) itself. */
struct qn_drive_link {
  struct qn_args a;
  qn_u32 family; /* QN_FAM_* */
  qn_u32 kind;   /* QN_LINK_* */
  qn_u32 group_first, group_end; /* the links of this operator's shares: [first, end) */
};

/* How long one plan link ran in a generation (drive_link_time, one entry per
 * plan link, mmapable): its two longest runs, the source of the longest-link
 * figures. The links' time is wall time, so a pause of the virtual CPU (the
 * host running something else) lands in whichever link was running, once; a
 * link that itself runs long does so at every token, and shows in second_ns too. */
struct qn_drive_link_time {
  qn_u64 gen_ns;     /* the generation these figures are of (its t_start_ns); older ones count as 0 */
  qn_u64 longest_ns; /* the longest run */
  qn_u64 second_ns;  /* the second longest: the longest the link took twice */
};

/* A submission (ctx of qn_drive_start). */
struct qn_drive_submit {
  qn_u32 tag;          /* echoed in every record (a request id) */
  qn_u32 kv_slot;      /* the session's KV cache: its slot in kv_outer */
  qn_u32 kv_positions; /* that cache's capacity */
  qn_u32 pos;          /* positions cached before the feed */
  qn_u32 feed_len;     /* tokens in drive_prompt to feed first (1..QN_DRIVE_PROMPT_MAX) */
  qn_u32 max_tokens;   /* tokens to choose at most (>= 1) */
  qn_u32 mode;         /* QN_DRIVE_* */
  qn_u32 vocab_top_k;  /* k the vocabulary pass keeps (<= QN_TOPK_MAX) */
  qn_u32 list_k;       /* QN_DRIVE_LIST: candidates taken from the merged list */
  qn_u32 n_stop;
  qn_s32 stop_ids[QN_DRIVE_STOP_MAX];
  qn_u64 draw0; /* the first token's draw index (tokens the request chose before) */
  /* QN_DRIVE_LIST / WHOLE: qn_sample's parameters (n, draw fields set per token;
   * the seen bitmap in sample_buf set by the client for the history) */
  struct qn_sample_hdr params;
  qn_s32 status; /* written by qn_drive_start: 0 started, else why not */
  qn_u32 client; /* 0: the daemon's; k + 1: kernel-client session k (kd_sessions, kd_results) */
  qn_u32 cpu;    /* written by qn_drive_start: the CPU whose workqueue runs the first chain */
  qn_u32 pad;
};

/* The running generation (drive_state, one entry, mmapable). */
struct qn_drive_state {
  struct qn_drive_submit sub;
  qn_u32 running;   /* 1 from the start until the last record */
  qn_u32 cancel;    /* set by a client: end at the next link */
  qn_u32 link;      /* the plan link running or next */
  qn_u32 npos;      /* positions of the current pass */
  qn_u32 pass_pos0; /* absolute position of its first row */
  qn_u32 mask;      /* positions of the pass that want logits */
  qn_u32 pos;       /* positions fed so far (the pass's included) */
  qn_u32 fed;       /* tokens of the feed consumed */
  qn_u32 generated; /* tokens chosen */
  qn_s32 last_token;
  qn_u32 finish;    /* QN_FINISH_* once ended */
  qn_s32 status;    /* QN_FINISH_ERROR: the operator's status */
  qn_u32 err_link;
  qn_u32 lost;      /* records the ring buffer had no room for */
  qn_u64 links_run; /* links since the start */
  qn_u64 t_start_ns, t_end_ns;
  qn_u64 busy_ns;     /* the links' run time, summed (the chains' CPU time in BPF) */
  qn_u64 claim;       /* the current operator's shares: group end << 32 | next unclaimed link */
  qn_u64 waits;       /* links that found every share claimed and re-queued */
  qn_u32 done;        /* shares of the current operator done */
  qn_u32 joined;      /* chains that joined (qn_drive_join) */
  qn_u32 active;      /* links running now (user space waits for 0 after the end) */
  qn_u32 pad;
  qn_u64 slot_links[QN_DRIVE_CPUS]; /* operator shares each CPU slot's chain ran */
  /* Who holds the engine (the activation maps, sample_buf, the chain):
   * QN_OWNER_* taken by compare-and-swap, by the daemon before a pass batch
   * or a kernel-driver submission (user space, through the mmapped map) and
   * by the kernel doorbell before a kernel-started generation. */
  qn_u32 owner;
  qn_u32 yield;        /* the daemon waits for the engine: a kernel-started generation ends at its next token */
  qn_u64 owner_waits;  /* daemon acquisitions that found the kernel holding the engine */
};

#define QN_OWNER_FREE 0
#define QN_OWNER_DAEMON 1
#define QN_OWNER_KERNEL 2

/* One ring buffer record (drive_out) per chosen token, and one for a cancel
 * or an error. */
struct qn_drive_record {
  qn_u32 tag;
  qn_u32 index;  /* the token's index in the generation */
  qn_s32 token;  /* -1 for QN_FINISH_CANCELLED / ERROR */
  qn_u32 finish; /* QN_FINISH_* (the generation's last record), else 0 */
  qn_s32 status;
  qn_u32 pos;    /* positions cached when the token was chosen */
};

/* A matrix link's work bound: the weights one share of an operator multiplies
 * for one position. The chain gets its CPU back only between links, so a
 * link must stay short (the 0.6B shape's vocabulary, 156 M weights in two
 * shares, held a CPU for 60-200 ms). An operator has at least `threads`
 * shares (each chain runs one at a time, in its CPU slot's scratch). */
#define QN_DRIVE_SHARE_WEIGHTS (8ull << 20)
QN_INLINE qn_u32 qn_drive_shares(qn_u64 rows, qn_u64 cols, qn_u32 threads) {
  qn_u64 n = (rows * cols + QN_DRIVE_SHARE_WEIGHTS - 1) / QN_DRIVE_SHARE_WEIGHTS;
  return n > threads ? (qn_u32)n : threads;
}
/* Shares of each matrix operator (rows x columns as the model has them). */
QN_INLINE qn_u32 qn_drive_qkv_shares(const struct qn_shape *s) { return qn_drive_shares(s->qkv_dim, s->hidden, s->threads); }
QN_INLINE qn_u32 qn_drive_o_shares(const struct qn_shape *s) { return qn_drive_shares(s->hidden, s->q_dim, s->threads); }
QN_INLINE qn_u32 qn_drive_gateup_shares(const struct qn_shape *s) { return qn_drive_shares(2ull * s->inter, s->hidden, s->threads); }
QN_INLINE qn_u32 qn_drive_down_shares(const struct qn_shape *s) { return qn_drive_shares(s->hidden, s->inter, s->threads); }
QN_INLINE qn_u32 qn_drive_vocab_shares(const struct qn_shape *s) { return qn_drive_shares(s->vocab, s->hidden, s->threads); }

/* Links of the plan: embed; per layer QKV, attention (threads shares), O,
 * GATEUP, DOWN; VOCAB; merge; sample. The vocabulary's first link is
 * qn_drive_vocab_link. */
QN_INLINE qn_u32 qn_drive_vocab_link(const struct qn_shape *s) {
  return 1 + s->n_layers * (qn_drive_qkv_shares(s) + s->threads + qn_drive_o_shares(s) + qn_drive_gateup_shares(s) +
                            qn_drive_down_shares(s));
}
QN_INLINE qn_u32 qn_drive_plan_links(const struct qn_shape *s) { return qn_drive_vocab_link(s) + qn_drive_vocab_shares(s) + 2; }

#endif
