/* Example kernel client (docs/kernel-clients.md, "BPF programs as clients"):
 * on every exec of a program whose name is TARGET, submit its command line
 * (the arguments after argv[0], joined by spaces) as a text prompt to
 * qwen3-bpfd through the pinned submission ring. The daemon writes the
 * model's continuation into the session's result slot (pinned qk_results),
 * where anyone with the pins can read it: no user-space process of ours is
 * in the path once the program is attached and its link pinned.
 */
#include <linux/bpf.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "kclient_abi.h"

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
__u32 submitted = 0; /* .bss: how many execs were submitted */

/* The daemon's ring: the loader points this at the pinned map. */
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
  __u32 len;
};

/* bpf_loop callback: the arguments' separating NULs become spaces. */
static int nul_to_space(__u32 i, void* ctx) {
  struct loop_ctx* lc = ctx;
  __u32 zero = 0;
  struct qk_submission* rec = bpf_map_lookup_elem(&scratch, &zero);
  if (!rec || i >= lc->len || i >= QK_MAX_PROMPT_BYTES) return 1;
  if (rec->data.prompt[i] == 0) rec->data.prompt[i] = ' ';
  return 0;
}

SEC("raw_tp/sched_process_exec")
int on_exec(void* ctx) {
  char comm[16];
  bpf_get_current_comm(comm, sizeof comm);
  for (int i = 0; i < 16; i++) {
    if (comm[i] != TARGET[i]) return 0;
    if (comm[i] == 0) break;
  }
  struct task_struct* task = (struct task_struct*)bpf_get_current_task();
  unsigned long start = BPF_CORE_READ(task, mm, arg_start);
  unsigned long end = BPF_CORE_READ(task, mm, arg_end);
  __u32 zero = 0;
  struct qk_submission* rec = bpf_map_lookup_elem(&scratch, &zero);
  if (!rec || end <= start) return 0;

  /* Skip argv[0]: its length, then the rest of the arguments. */
  long n0 = bpf_probe_read_user_str(rec->data.prompt, 256, (const void*)start);
  if (n0 <= 0 || start + n0 >= end) return 0;
  __u64 len = end - (start + n0);
  if (len > QK_MAX_PROMPT_BYTES) len = QK_MAX_PROMPT_BYTES;
  if (len == 0 || bpf_probe_read_user(rec->data.prompt, len, (const void*)(start + n0)) != 0) return 0;
  if (rec->data.prompt[(len - 1) & (QK_MAX_PROMPT_BYTES - 1)] == 0) len--; /* the last argument's NUL */
  if (len == 0) return 0;
  rec->data.prompt_len = (__u16)len;
  struct loop_ctx lc = {.len = (__u32)len};
  bpf_loop(QK_MAX_PROMPT_BYTES, nul_to_space, &lc, 0);

  struct qk_generate* g = &rec->data;
  g->hdr.magic = QK_MAGIC;
  g->hdr.version = QK_VERSION;
  g->hdr.kind = QK_GENERATE;
  g->hdr.flags = QK_F_TEXT; /* the daemon tokenizes; the prompt replaces the session's history */
  g->hdr.request_id = REQUEST_BASE + __sync_fetch_and_add(&submitted, 1);
  g->hdr.from_index = 0;
  for (int i = 0; i < QK_SESSION_BYTES; i++) g->hdr.session[i] = SESSION[i];
  g->max_tokens = MAX_TOKENS;
  g->reserved = 0;
  g->sampling.temperature_q16 = 0; /* greedy */
  g->sampling.top_p_q16 = QK_UNSET;
  g->sampling.min_p_q16 = QK_UNSET;
  g->sampling.repetition_penalty_q16 = QK_UNSET;
  g->sampling.top_k = QK_UNSET;
  g->sampling.seed_set = 0;
  g->sampling.seed = 0;
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
