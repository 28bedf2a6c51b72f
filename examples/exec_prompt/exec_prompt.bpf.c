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
__u32 submitted = 0; /* .bss: execs submitted */
__u32 shed = 0;      /* .bss: execs that found the request queue full */

struct loop_ctx {
  int key;
  __u32 len;
};

/* bpf_loop callback: the arguments' separating NULs become spaces. */
static int nul_to_space(__u32 i, void* ctx) {
  struct loop_ctx* lc = ctx;
  struct qk_kd_request* q = kd_client_entry(lc->key);
  if (!q || i >= lc->len || i >= QK_MAX_PROMPT_BYTES) return 1;
  if (q->g.prompt[i] == 0) q->g.prompt[i] = ' ';
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
  int key = kd_client_claim();
  struct qk_kd_request* q = kd_client_entry(key);
  if (!q) {
    __sync_fetch_and_add(&shed, 1);
    return 0;
  }
  struct qk_generate* g = &q->g;
  /* Skip argv[0]: its length, then the rest of the arguments. */
  long n0 = bpf_probe_read_user_str(g->prompt, 256, (const void*)start);
  __u64 len = n0 > 0 && start + n0 < end ? end - (start + n0) : 0;
  if (len > QK_MAX_PROMPT_BYTES) len = QK_MAX_PROMPT_BYTES;
  if (len == 0 || bpf_probe_read_user(g->prompt, len, (const void*)(start + n0)) != 0) len = 0;
  if (len && g->prompt[(len - 1) & (QK_MAX_PROMPT_BYTES - 1)] == 0) len--; /* the last argument's NUL */
  if (len == 0) {
    __sync_lock_test_and_set(&q->state, QK_KD_FREE);
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
  kd_client_submit(q);
  return 0;
}

char LICENSE[] SEC("license") = "GPL";
