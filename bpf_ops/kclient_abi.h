// The wire format of kernel clients (docs/kernel-clients.md): the UDP
// datagrams of the XDP endpoint, the submission record that the XDP program
// and other BPF programs put on the daemon's queue, and the per-session result
// slots the daemon fills and the XDP program answers polls from. One header
// for BPF C and user space (C and C++): fixed-size little-endian structs, no
// pointers, no implicit padding (every struct is checked by a static assert).
#ifndef QWEN3_KCLIENT_ABI_H
#define QWEN3_KCLIENT_ABI_H

#ifdef __bpf__
#include <linux/types.h>
#else
#include <linux/types.h>
#include <stddef.h>
#endif

#define QK_MAGIC 0x434B3351u /* the bytes "Q3KC" */
#define QK_VERSION 1

// Datagram kinds (qk_hdr.kind).
enum qk_kind {
  QK_GENERATE = 1, /* qk_generate: start a generation on a session */
  QK_POLL = 2,     /* qk_answer-sized: the XDP program answers it in place */
  QK_CANCEL = 3,   /* qk_hdr: end the named request within one token */
  QK_ANSWER = 4,   /* qk_answer: what a poll turns into */
};

// qk_hdr.flags of a QK_GENERATE.
#define QK_F_TEXT 0x01   /* the prompt is UTF-8 bytes (the daemon tokenizes); else little-endian __s32 ids */
#define QK_F_APPEND 0x02 /* continue the session's history; else the prompt replaces it (its common prefix
                            with the history still reuses the KV) */
#define QK_F_ALL (QK_F_TEXT | QK_F_APPEND)

#define QK_SESSION_BYTES 32     /* session id: 1..32 of [A-Za-z0-9_.-], NUL padded */
#define QK_MAX_PROMPT_BYTES 1024 /* text bytes, or 4 x ids */
#define QK_MAX_TOKENS 4096       /* qk_generate.max_tokens at most */
#define QK_UNSET 0xFFFFFFFFu     /* a sampling field left to the model's generation_config */
#define QK_RING 128              /* token entries per result slot (power of two) */
#define QK_ANSWER_TOKENS 8       /* token entries per answer datagram */
#define QK_SLOTS 64              /* result slots: sessions with a kernel client's result at once */

// The head of every datagram and of every answer.
struct qk_hdr {
  __u32 magic;      /* QK_MAGIC */
  __u16 version;    /* QK_VERSION */
  __u8 kind;        /* enum qk_kind */
  __u8 flags;       /* QK_F_* (generate), 0 otherwise */
  __u32 request_id; /* chosen by the client, non-zero; names the generation in polls and cancels */
  __u32 from_index; /* poll: the first entry wanted; 0 otherwise */
  char session[QK_SESSION_BYTES];
};

// Sampling in fixed point: Q16.16 (value * 65536), or QK_UNSET.
struct qk_sampling {
  __u32 temperature_q16;        /* 0: greedy */
  __u32 top_p_q16;              /* (0, 1] */
  __u32 min_p_q16;              /* [0, 1] */
  __u32 repetition_penalty_q16; /* > 0; 1.0 = none */
  __u32 top_k;                  /* 0: no limit */
  __u32 seed_set;               /* 1: `seed` is used; 0: a random seed */
  __u64 seed;
};

// A QK_GENERATE datagram: the fixed part, then prompt_len bytes (QK_F_TEXT) or
// prompt_len ids; the datagram may stop right after the prompt.
struct qk_generate {
  struct qk_hdr hdr;
  __u16 max_tokens; /* 1..QK_MAX_TOKENS */
  __u16 prompt_len; /* bytes (QK_F_TEXT) or ids; 1..QK_MAX_PROMPT_BYTES bytes either way */
  __u32 reserved;   /* 0 */
  struct qk_sampling sampling;
  __u8 prompt[QK_MAX_PROMPT_BYTES];
};
#define QK_GENERATE_FIXED ((unsigned)(sizeof(struct qk_generate) - QK_MAX_PROMPT_BYTES))

// Where a queued submission came from (qk_submission.origin).
enum qk_origin {
  QK_ORIGIN_UDP = 1, /* the XDP endpoint */
  QK_ORIGIN_BPF = 2, /* another BPF program, through the pinned ring */
};

// One record of the submission ring (BPF_MAP_TYPE_RINGBUF "qk_submit"): what
// the daemon reads. `data` holds the datagram as sent (a qk_generate), `len`
// its length. Other BPF programs submit the same record with origin QK_ORIGIN_BPF.
struct qk_submission {
  __u32 origin;     /* enum qk_origin */
  __u32 len;        /* bytes of `data` used */
  __u32 saddr;      /* UDP: source IPv4 address, network order; 0 otherwise */
  __u16 sport;      /* UDP: source port, network order */
  __u16 reserved;
  __u64 received_ns; /* bpf_ktime_get_ns() at arrival */
  struct qk_generate data;
};

// Finish reasons (qk_result_slot.finish, qk_answer.finish); 0 while running.
enum qk_finish {
  QK_FINISH_NONE = 0,
  QK_FINISH_LENGTH = 1,
  QK_FINISH_EOS = 2,
  QK_FINISH_STOP = 3,
  QK_FINISH_CANCELLED = 4,
  QK_FINISH_ERROR = 5, /* see `error` */
};

// Error codes (qk_result_slot.error, qk_answer.error).
enum qk_error {
  QK_OK = 0,
  QK_E_INVALID = 1,      /* the request's values (ids out of range, bad UTF-8, sampling, too long) */
  QK_E_BUSY = 2,         /* the daemon's queue of kernel requests is full: retry later */
  QK_E_LIMIT = 3,        /* a session / KV / per-uid budget is reached */
  QK_E_NOT_FOUND = 4,    /* the session belongs to another uid */
  QK_E_UNAVAILABLE = 5,  /* loading, stopping */
  QK_E_SESSION_BUSY = 6, /* a request already runs on the session */
  QK_E_INTERNAL = 7,
  QK_E_LOST = 8,         /* poll: the entries asked for are no longer in the ring */
};

// Answer status (qk_answer.status).
enum qk_status {
  QK_ST_OK = 0,       /* entries (maybe none yet) of the request */
  QK_ST_PENDING = 1,  /* the request is not (yet) known under this session: queued, dropped or mistyped */
  QK_ST_UNKNOWN = 2,  /* no result slot holds this session */
};

// One generated token (or a continuation of its text) in the result ring.
#define QK_TOK_TEXT_BYTES 20
#define QK_TOK_CONT 0x01 /* more text of the token before it (id repeated, or -1 for the final flush) */
struct qk_token {
  __s32 id;        /* token id, -1 for text released at the end */
  __u32 seq;       /* entry number in the request: 0, 1, 2, ... (what from_index counts) */
  __u16 index;     /* token number in the request */
  __u8 text_len;   /* bytes of text used */
  __u8 flags;      /* QK_TOK_* */
  char text[QK_TOK_TEXT_BYTES]; /* UTF-8 released with this token (whole characters over the request) */
};

// A result slot (array map "qk_results", BPF_F_MMAPABLE): the daemon writes an
// entry, then publishes `produced` (release), and sets `finish` only after the
// last entry; readers read `finish`, then `produced`, then the entries below it.
// The daemon never runs QK_RING entries ahead of `acked` (the highest poll
// from_index, written by the XDP program), so an entry is never rewritten
// while a client may still ask for it.
struct qk_result_slot {
  char session[QK_SESSION_BYTES];
  __u32 request_id; /* the request this slot reports; written last when a request takes the slot */
  __u32 produced;   /* entries written */
  __u32 finish;     /* enum qk_finish, 0 while running */
  __u32 error;      /* enum qk_error */
  __u32 cancel;     /* a QK_CANCEL for this request id was received (written by BPF) */
  __u32 acked;      /* highest from_index polled (written by BPF) */
  __u32 positions;  /* the session's positions (KV) when the request finished */
  __u32 prompt_tokens;
  __u32 cached_tokens; /* prompt tokens taken from the KV, not computed */
  __u32 tokens;        /* tokens generated so far */
  __u64 last_poll_ns;  /* bpf_ktime_get_ns() of the last poll (written by BPF) */
  struct qk_token ring[QK_RING];
};

// The answer to a poll: the XDP program rewrites the poll datagram (which
// must be exactly this size) and sends it back with XDP_TX.
struct qk_answer {
  struct qk_hdr hdr; /* kind QK_ANSWER; request_id, from_index and session as polled */
  __u8 status;       /* enum qk_status */
  __u8 count;        /* entries below */
  __u16 reserved;
  __u32 finish;
  __u32 error;
  __u32 produced;
  __u32 positions;
  __u32 prompt_tokens;
  __u32 cached_tokens;
  __u32 tokens;
  struct qk_token entries[QK_ANSWER_TOKENS];
};

// Per-CPU counters (array map "qk_counters"), summed by the daemon for /metrics.
enum qk_counter {
  QK_C_MALFORMED = 0,    /* datagrams to the port that failed validation (dropped) */
  QK_C_RATE_LIMITED = 1, /* submissions over their source's token bucket (dropped) */
  QK_C_SHED = 2,         /* submissions the full ring could not take (dropped) */
  QK_C_SUBMITTED = 3,    /* submissions queued */
  QK_C_POLLS = 4,        /* polls answered with XDP_TX */
  QK_C_CANCELS = 5,      /* cancels that reached a running request's slot */
  QK_C_COUNT = 6,
};

// A source's token bucket (LRU hash "qk_rate", key: IPv4 source address).
struct qk_bucket {
  __u64 last_ns;
  __u64 tokens_milli; /* thousandths of a submission */
};

/* ---- The kernel path (docs/kernel-clients.md, "The kernel path"): a BPF
 * program submits into the daemon's engine with no user-space step. It
 * writes a qk_generate into a free entry of the pinned kd_requests array,
 * marks it ready and rings the doorbell (bpf_wq_start on the pinned kd_bell):
 * the driver's doorbell program takes the engine (drive_state.owner), maps
 * the request to token ids in BPF, and starts the kernel driver's chain on a
 * session of the kernel pool (kd_sessions: KV slots the daemon reserved); the
 * chain writes each token into the session's kd_results slot. bpf_ops/kdoor_client.h
 * is the client side. */
#define QK_KD_QUEUE 8       /* requests waiting for the engine at once */
#define QK_KD_SESSIONS 4    /* sessions of the kernel path (each a reserved KV slot and a result slot) */
#define QK_KD_MAX_TOKENS 64 /* tokens one kernel-path request generates at most (<= QK_RING / 2) */
#define QK_KD_TEXT_BYTES 23 /* bytes of a token's text the kernel keeps (kd_text) */

/* qk_kd_request.state */
enum qk_kd_req_state {
  QK_KD_FREE = 0,
  QK_KD_WRITING = 1, /* a client is filling it */
  QK_KD_READY = 2,   /* the doorbell may take it */
  QK_KD_TAKEN = 3,   /* the doorbell is starting it */
};

struct qk_kd_request {
  __u32 state; /* enum qk_kd_req_state; taken by compare-and-swap */
  __u32 seq;   /* order of arrival (kd_state.seq) */
  struct qk_generate g; /* greedy only: sampling.temperature_q16 = 0 */
};

/* A session of the kernel path (array "kd_sessions"); index k's results are
 * kd_results[k]. kv_slot / kv_capacity / owner_uid are set by the daemon. */
struct qk_kd_session {
  char session[QK_SESSION_BYTES];
  __u32 state;         /* 0 free, 1 in use (taken by compare-and-swap) */
  __u32 kv_slot;       /* the reserved KV cache's slot in kv_outer */
  __u32 kv_capacity;   /* its positions */
  __u32 positions;     /* positions its KV holds */
  __u32 owner_uid;     /* kernel_client_uid */
  __s32 pending_token; /* the last chosen token, not yet in the KV (fed first by an append); -1 none */
  __u32 running;       /* a generation runs on it */
  __u32 request_id;    /* the last request */
  __u32 generations;   /* requests served */
  __u32 tokens;        /* tokens generated, all requests */
  __u32 paused_left;   /* a request paused for the daemon (yield): tokens it may still choose */
  __u32 paused_base;   /* ... and tokens it chose before the pause */
};

/* The kernel path's state (array "kd_state", one entry, mmapable): the
 * tables the daemon fills at load, the queue's counters. */
struct qk_kd_state {
  __u32 enabled;    /* 1 once the daemon filled the tables and armed the doorbell */
  __u32 vocab;      /* the model's vocabulary (ids accepted) */
  __u32 seq;        /* next request's arrival number */
  __u32 pending;    /* requests ready, not yet taken */
  __u32 n_stop;
  __s32 stop_ids[16]; /* EOS ids: a generation ends at one */
  __s32 byte_ids[256]; /* Qwen3's byte-level base token of each byte */
  __u32 resume;     /* sessions whose request paused for the daemon (bit k: kd_sessions[k]), resumed first */
  __u64 rung;       /* doorbell callbacks run */
  __u64 started;    /* generations started */
  __u64 served;     /* generations ended (any finish) */
  __u64 busy;       /* doorbell found the engine held: retried by a 1 ms timer */
  __u64 shed;       /* clients that found no free request entry (counted by the client) */
  __u64 refused;    /* requests refused (invalid, no session, too long): error in the result slot */
  __u64 tokens;     /* tokens generated */
  __u64 yields;     /* kernel-started generations paused at a token boundary for the daemon */
};

/* A token's text in the kernel (array "kd_text", one per vocabulary id). */
struct qk_kd_text {
  __u8 len; /* bytes (<= QK_KD_TEXT_BYTES; a longer token's text is cut) */
  char bytes[QK_KD_TEXT_BYTES];
};

#ifndef __bpf__
#ifdef __cplusplus
static_assert(sizeof(struct qk_hdr) == 48, "qk_hdr");
static_assert(sizeof(struct qk_sampling) == 32, "qk_sampling");
static_assert(sizeof(struct qk_generate) == 48 + 8 + 32 + QK_MAX_PROMPT_BYTES, "qk_generate");
static_assert(sizeof(struct qk_token) == 32, "qk_token");
static_assert(sizeof(struct qk_answer) == 48 + 32 + 8 * 32, "qk_answer");
static_assert(sizeof(struct qk_submission) == 24 + sizeof(struct qk_generate), "qk_submission");
static_assert(sizeof(struct qk_result_slot) == 32 + 40 + 8 + QK_RING * 32, "qk_result_slot");
static_assert(sizeof(struct qk_kd_request) == 8 + sizeof(struct qk_generate), "qk_kd_request");
static_assert(sizeof(struct qk_kd_session) == 32 + 40 + 8, "qk_kd_session");
static_assert(sizeof(struct qk_kd_text) == 24, "qk_kd_text");
static_assert(sizeof(struct qk_kd_state) % 8 == 0, "qk_kd_state");
#endif
#endif

/* A session id as the wire carries it: 1..32 of [A-Za-z0-9_.-], then NULs
 * only. The one rule for the XDP endpoint and the kernel doorbell. */
static inline __attribute__((always_inline)) int qk_valid_session(const char* s) {
  int ended = 0;
  for (int i = 0; i < QK_SESSION_BYTES; i++) {
    char c = s[i];
    if (c == 0) {
      if (i == 0) return 0;
      ended = 1;
      continue;
    }
    if (ended) return 0;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
             c == '-';
    if (!ok) return 0;
  }
  return 1;
}

#endif
