/* Example kernel client (docs/kernel-clients.md, "The kernel path"): on
 * every exec of a program whose name is TARGET, submit its command line (the
 * arguments after argv[0], joined by spaces) as a text prompt straight into
 * qwen3-bpfd's engine: the request goes into the pinned kd_requests map and
 * this program rings the driver's doorbell (bpf_wq_start on the pinned
 * kd_bell). The kernel maps the bytes to token ids, runs the generation and
 * writes the answer into the session's slot of the pinned kd_results: no
 * user-space process is in the path once the program is attached and its
 * link pinned. A tp_btf program: bpf_wq_start is a kfunc that tracing
 * programs may call (a raw or classic tracepoint may not hold a map with a
 * bpf_wq).
 */
#include <linux/bpf.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "kdoor_client.h"

/* Just the fields we read; CO-RE finds their offsets in the running kernel. */
struct mm_struct {
  unsigned long arg_start;
  unsigned long arg_end;
} __attribute__((preserve_access_index));
struct task_struct {
  struct mm_struct* mm;
} __attribute__((preserve_access_index));

const volatile char TARGET[16] = {};  /* comm of the program to watch */
const volatile char SESSION[QK_SESSION_BYTES] = {};
const volatile __u16 MAX_TOKENS = 16;
const volatile __u32 REQUEST_BASE = 1;
const volatile __u8 BROKER = 0; /* 1: submit through the daemon's ring (the broker path) instead, to compare */
__u32 submitted = 0; /* .bss: execs submitted */
__u32 shed = 0;      /* .bss: execs that found the request queue full */

/* The broker path: the daemon's submission ring, and a record being built. */
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} qk_submit SEC(".maps");
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qk_submission));
  __uint(max_entries, 1);
} scratch SEC(".maps");

struct loop_ctx {
  int key; /* kd_requests entry, or -1: the scratch record */
  __u32 len;
};

static __always_inline struct qk_generate* request_of(int key) {
  if (key >= 0) {
    struct qk_kd_request* q = kd_client_entry(key);
    if (!q) return 0;
    barrier_var(q); /* the offset after the NULL check (the verifier's rule) */
    return &q->g;
  }
  __u32 zero = 0;
  struct qk_submission* rec = bpf_map_lookup_elem(&scratch, &zero);
  if (!rec) return 0;
  barrier_var(rec);
  return &rec->data;
}

/* bpf_loop callback: the arguments' separating NULs become spaces. */
static int nul_to_space(__u32 i, void* ctx) {
  struct loop_ctx* lc = ctx;
  struct qk_generate* g = request_of(lc->key);
  if (!g || i >= lc->len || i >= QK_MAX_PROMPT_BYTES) return 1;
  if (g->prompt[i] == 0) g->prompt[i] = ' ';
  return 0;
}

SEC("tp_btf/sched_process_exec")
int on_exec(__u64* ctx) {
  char comm[16];
  bpf_get_current_comm(comm, sizeof comm);
  for (int i = 0; i < 16; i++) {
    if (comm[i] != TARGET[i]) return 0;
    if (comm[i] == 0) break;
  }
  struct task_struct* task = (struct task_struct*)bpf_get_current_task();
  unsigned long start = BPF_CORE_READ(task, mm, arg_start);
  unsigned long end = BPF_CORE_READ(task, mm, arg_end);
  if (end <= start) return 0;
  int key = BROKER ? -1 : kd_client_claim();
  struct qk_kd_request* q = kd_client_entry(key);
  struct qk_generate* g = request_of(key);
  if (!g || (!BROKER && !q)) {
    __sync_fetch_and_add(&shed, 1);
    return 0;
  }
  /* Skip argv[0]: its length, then the rest of the arguments. */
  long n0 = bpf_probe_read_user_str(g->prompt, 256, (const void*)start);
  __u64 len = n0 > 0 && start + n0 < end ? end - (start + n0) : 0;
  if (len > QK_MAX_PROMPT_BYTES) len = QK_MAX_PROMPT_BYTES;
  if (len == 0 || bpf_probe_read_user(g->prompt, len, (const void*)(start + n0)) != 0) len = 0;
  if (len && g->prompt[(len - 1) & (QK_MAX_PROMPT_BYTES - 1)] == 0) len--; /* the last argument's NUL */
  if (len == 0) {
    if (q) __sync_lock_test_and_set(&q->state, QK_KD_FREE);
    return 0;
  }
  struct loop_ctx lc = {.key = key, .len = (__u32)len};
  bpf_loop(QK_MAX_PROMPT_BYTES, nul_to_space, &lc, 0);

  g->hdr.magic = QK_MAGIC;
  g->hdr.version = QK_VERSION;
  g->hdr.kind = QK_GENERATE;
  g->hdr.flags = QK_F_TEXT; /* bytes: the kernel maps them to base tokens; the prompt replaces the history */
  g->hdr.request_id = REQUEST_BASE + __sync_fetch_and_add(&submitted, 1);
  g->hdr.from_index = 0;
  for (int i = 0; i < QK_SESSION_BYTES; i++) g->hdr.session[i] = SESSION[i];
  g->max_tokens = MAX_TOKENS;
  g->prompt_len = (__u16)len;
  g->reserved = 0;
  g->sampling.temperature_q16 = 0; /* greedy: the kernel path's only mode */
  g->sampling.top_p_q16 = QK_UNSET;
  g->sampling.min_p_q16 = QK_UNSET;
  g->sampling.repetition_penalty_q16 = QK_UNSET;
  g->sampling.top_k = QK_UNSET;
  g->sampling.seed_set = 0;
  g->sampling.seed = 0;
  if (q) return kd_client_submit(q), 0;
  __u32 zero = 0;
  struct qk_submission* rec = bpf_map_lookup_elem(&scratch, &zero);
  if (!rec) return 0;
  rec->origin = QK_ORIGIN_BPF;
  rec->len = QK_GENERATE_FIXED + (__u32)len;
  rec->saddr = 0;
  rec->sport = 0;
  rec->reserved = 0;
  rec->received_ns = bpf_ktime_get_ns();
  bpf_ringbuf_output(&qk_submit, rec, sizeof(*rec), 0);
  return 0;
}

char LICENSE[] SEC("license") = "GPL";
