/* Experiments behind docs/kernel-driver.md: how a BPF program can drive
 * decoding with no bpf() call per token on this kernel.
 *   - chain_start / chain_cb: a bpf_wq per CPU slot that re-queues itself,
 *     one "token" of simulated work (bpf_loop iterations) per callback, a ring
 *     buffer record per token, optionally `barriers` spin barriers with the
 *     other slot's chain per token;
 *   - barrier_run: spin barriers between two syscall-program runs (one per
 *     pinned thread): the cost of one operator boundary done in the kernel;
 *   - busy_run: one uninterrupted syscall run of a given work size.
 * The work unit is one bpf_loop iteration with an atomic add, as in issue 25.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

/* Debian 12's uapi headers predate bpf_wq (Linux 6.10); the layout is the uapi one. */
struct bpf_wq {
  __u64 __opaque[2];
} __attribute__((aligned(8)));

extern int bpf_wq_init(struct bpf_wq *wq, void *p__map, unsigned int flags) __ksym;
extern int bpf_wq_start(struct bpf_wq *wq, unsigned int flags) __ksym;
extern int bpf_wq_set_callback_impl(struct bpf_wq *wq, int (callback_fn)(void *map, int *key, void *value),
                                    unsigned int flags, void *aux__ign) __ksym;

struct chain {
  struct bpf_wq wq;
  __u64 left;      /* tokens still to run */
  __u64 work;      /* work units per token */
  __u64 barriers;  /* spin barriers with the other slot per token */
  __u64 token;     /* tokens done */
  __u64 max_run_ns;
  __u64 timeouts;  /* barriers given up (the other side never came) */
  __u64 spins;     /* barrier wait iterations, summed */
  __u64 every;     /* a ring buffer record every this many tokens (and the last) */
};
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 2);
  __type(key, int);
  __type(value, struct chain);
} chains SEC(".maps");

struct sync {
  __u64 arrived; /* barrier arrivals, all rounds */
  __u64 sink;
};
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, int);
  __type(value, struct sync);
} syncs SEC(".maps");

struct event {
  __u32 slot, cpu;
  __u64 token, t_ns, run_ns;
};
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 16);
} events SEC(".maps");

struct args {
  __u32 slot, parties;
  __u64 tokens, work, barriers, rounds;
  __u64 out_ns, out_spins, out_timeouts; /* written back */
  __s32 status, cpu;
};

static struct sync *sync_of(void) {
  int k = 0;
  return bpf_map_lookup_elem(&syncs, &k);
}

struct work_ctx {
  struct sync *s; /* bpf_loop's context must be on the stack */
};
static long work_cb(__u64 i, void *ctx) {
  struct work_ctx *w = ctx;
  __sync_fetch_and_add(&w->s->sink, 1);
  return 0;
}
static void work(struct sync *s, __u64 units) {
  struct work_ctx w = {s};
  bpf_loop(units, work_cb, &w, 0);
}

/* One party's barrier state, in map memory: the verifier then sees the same
 * state on every bpf_loop iteration and checks each callback once. */
struct waiter {
  __u64 target, spins, timeouts, passed;
  __u32 done, pad;
};
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 2);
  __type(key, int);
  __type(value, struct waiter);
} waiters SEC(".maps");

struct bar_ctx {
  struct sync *s;
  struct waiter *w;
  __u64 parties;
};
static long wait_cb(__u64 i, void *ctx) {
  struct bar_ctx *b = ctx;
  b->w->spins++;
  if (*(volatile __u64 *)&b->s->arrived >= b->w->target) {
    b->w->done = 1;
    return 1;
  }
  return 0;
}
/* Arrive, then spin until every party of this round arrived (bounded: a party
 * that never comes makes it a timeout, not a hang). */
static long bar_cb(__u64 i, void *ctx) {
  struct bar_ctx *b = ctx;
  __u64 mine = __sync_fetch_and_add(&b->s->arrived, 1);
  b->w->target = (mine / b->parties + 1) * b->parties;
  b->w->done = 0;
  bpf_loop(1 << 23, wait_cb, b, 0);
  if (!b->w->done) {
    b->w->timeouts++;
    return 1;
  }
  b->w->passed++;
  return 0;
}
static struct waiter *waiter_of(__u32 party) {
  int k = party & 1;
  struct waiter *w = bpf_map_lookup_elem(&waiters, &k);
  if (w) {
    w->spins = 0;
    w->timeouts = 0;
    w->passed = 0;
  }
  return w;
}

static int chain_cb(void *map, int *key, void *value) {
  struct chain *c = value;
  struct sync *s = sync_of();
  if (!s || !key) return 0;
  __u64 t0 = bpf_ktime_get_ns();
  work(s, c->work);
  struct waiter *w = waiter_of(*key);
  if (!w) return 0;
  struct bar_ctx b = {s, w, 2};
  if (c->barriers) bpf_loop(c->barriers, bar_cb, &b, 0);
  c->spins += w->spins;
  c->timeouts += w->timeouts;
  __u64 t1 = bpf_ktime_get_ns();
  if (t1 - t0 > c->max_run_ns) c->max_run_ns = t1 - t0;
  c->token++;
  struct event *e = 0;
  if (c->left <= 1 || !c->every || c->token % c->every == 0) e = bpf_ringbuf_reserve(&events, sizeof *e, 0);
  if (e) {
    e->slot = *key;
    e->cpu = bpf_get_smp_processor_id();
    e->token = c->token;
    e->t_ns = t1;
    e->run_ns = t1 - t0;
    bpf_ringbuf_submit(e, 0);
  }
  if (c->left > 1 && !w->timeouts) {
    c->left--;
    bpf_wq_start(&c->wq, 0);
  } else {
    c->left = 0;
  }
  return 0;
}

SEC("syscall")
int chain_start(struct args *a) {
  int slot = a->slot & 1;
  struct chain *c = bpf_map_lookup_elem(&chains, &slot);
  if (!c) return a->status = -1;
  c->left = a->tokens;
  c->work = a->work;
  c->barriers = a->barriers;
  c->token = 0;
  c->max_run_ns = 0;
  c->timeouts = 0;
  c->spins = 0;
  c->every = a->rounds;
  a->status = bpf_wq_init(&c->wq, &chains, 0);
  if (a->status) return a->status;
  a->status = bpf_wq_set_callback_impl(&c->wq, chain_cb, 0, 0);
  if (a->status) return a->status;
  a->cpu = bpf_get_smp_processor_id();
  a->status = bpf_wq_start(&c->wq, 0);
  return a->status;
}

SEC("syscall")
int barrier_run(struct args *a) {
  struct sync *s = sync_of();
  if (!s) return a->status = -1;
  struct waiter *w = waiter_of(a->slot);
  if (!w) return a->status = -1;
  struct bar_ctx b = {s, w, a->parties ? a->parties : 2};
  __u64 t0 = bpf_ktime_get_ns();
  bpf_loop(a->rounds, bar_cb, &b, 0);
  a->out_ns = bpf_ktime_get_ns() - t0;
  a->out_spins = w->spins;
  a->out_timeouts = w->timeouts;
  a->rounds = w->passed;
  a->cpu = bpf_get_smp_processor_id();
  return 0;
}

SEC("syscall")
int busy_run(struct args *a) {
  struct sync *s = sync_of();
  if (!s) return a->status = -1;
  __u64 t0 = bpf_ktime_get_ns();
  work(s, a->work);
  a->out_ns = bpf_ktime_get_ns() - t0;
  a->cpu = bpf_get_smp_processor_id();
  return 0;
}

/* Cross-program hops: the wq of slot 1 gets its callback from program
 * pong_arm, slot 0's from ping_arm; each callback starts the other slot's wq,
 * so a chain alternates between code verified in two different programs
 * (how a token's operators, too many instructions for one program, can
 * follow each other with no bpf() call). */
struct hop {
  __u64 left, hops, t0, t1;
};
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, int);
  __type(value, struct hop);
} hops SEC(".maps");

static int hop_to(int slot) {
  int k = 0;
  struct hop *h = bpf_map_lookup_elem(&hops, &k);
  struct chain *c = bpf_map_lookup_elem(&chains, &slot);
  if (!h || !c) return 0;
  h->hops++;
  h->t1 = bpf_ktime_get_ns();
  if (h->left == 0) return 0;
  h->left--;
  bpf_wq_start(&c->wq, 0);
  return 0;
}
static int ping_cb(void *map, int *key, void *value) { return hop_to(1); }
static int pong_cb(void *map, int *key, void *value) { return hop_to(0); }

static int arm(int slot, int (*cb)(void *, int *, void *)) {
  struct chain *c = bpf_map_lookup_elem(&chains, &slot);
  if (!c) return -1;
  int err = bpf_wq_init(&c->wq, &chains, 0);
  return err ? err : bpf_wq_set_callback_impl(&c->wq, cb, 0, 0);
}
SEC("syscall")
int pong_arm(struct args *a) { return a->status = arm(1, pong_cb); }
SEC("syscall")
int ping_arm(struct args *a) {
  a->status = arm(0, ping_cb);
  if (a->status) return a->status;
  int k = 0;
  struct hop *h = bpf_map_lookup_elem(&hops, &k);
  if (!h) return a->status = -1;
  h->left = a->tokens;
  h->hops = 0;
  h->t0 = bpf_ktime_get_ns();
  return a->status = hop_to(0);
}
