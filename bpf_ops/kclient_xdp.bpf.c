/* The UDP endpoint of kernel clients (docs/kernel-clients.md): an XDP program
 * on the configured interface and port. It validates every datagram to the
 * port (malformed: dropped and counted), rate-limits submissions per source
 * address (a token bucket in an LRU hash), queues generate requests on a
 * bounded ring buffer the daemon reads by epoll (full: shed and counted),
 * marks cancels in the request's result slot, and answers polls in place
 * from the result slots with XDP_TX: no user-space step on the answer path.
 * IPv4 only; datagrams to other ports, and everything else, pass untouched.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "kclient_abi.h"

/* Set by the daemon before load. */
const volatile __u16 QK_PORT = 0;         /* host order */
const volatile __u32 QK_RATE_PER_SEC = 0; /* submissions per second per source; 0: no limit */

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} qk_submit SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qk_result_slot));
  __uint(max_entries, QK_SLOTS);
  __uint(map_flags, BPF_F_MMAPABLE);
} qk_results SEC(".maps");

/* session id -> result slot index, written by the daemon. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(key_size, QK_SESSION_BYTES);
  __uint(value_size, 4);
  __uint(max_entries, QK_SLOTS);
} qk_sessions SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qk_bucket));
  __uint(max_entries, 4096);
} qk_rate SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, 8);
  __uint(max_entries, QK_C_COUNT);
} qk_counters SEC(".maps");

static __always_inline void count(__u32 which) {
  __u64* v = bpf_map_lookup_elem(&qk_counters, &which);
  if (v) *v += 1;
}

static __always_inline int valid_hdr(const struct qk_hdr* h) {
  return h->magic == QK_MAGIC && h->version == QK_VERSION && h->request_id != 0 && qk_valid_session(h->session);
}

/* A token bucket per source address: QK_RATE_PER_SEC submissions per second, bursts of as many. */
static __always_inline int rate_ok(__u32 saddr) {
  __u32 rate = QK_RATE_PER_SEC;
  if (rate == 0) return 1;
  __u64 now = bpf_ktime_get_ns();
  __u64 cap = (__u64)rate * 1000;
  struct qk_bucket* b = bpf_map_lookup_elem(&qk_rate, &saddr);
  if (!b) {
    struct qk_bucket fresh = {.last_ns = now, .tokens_milli = cap - 1000};
    bpf_map_update_elem(&qk_rate, &saddr, &fresh, BPF_ANY);
    return 1;
  }
  __u64 elapsed = now > b->last_ns ? now - b->last_ns : 0;
  if (elapsed > 10ull * 1000 * 1000 * 1000) elapsed = 10ull * 1000 * 1000 * 1000;
  __u64 tokens = b->tokens_milli + elapsed * rate / 1000000;
  if (tokens > cap) tokens = cap;
  b->last_ns = now;
  if (tokens < 1000) {
    b->tokens_milli = tokens;
    return 0;
  }
  b->tokens_milli = tokens - 1000;
  return 1;
}

static __always_inline int valid_generate(const struct qk_generate* g, __u32 len) {
  if (len < QK_GENERATE_FIXED || len > sizeof(struct qk_generate)) return 0;
  if (g->hdr.flags & ~QK_F_ALL) return 0;
  if (g->hdr.from_index != 0 || g->reserved != 0) return 0;
  if (g->max_tokens == 0 || g->max_tokens > QK_MAX_TOKENS) return 0;
  __u32 bytes = (__u32)g->prompt_len * ((g->hdr.flags & QK_F_TEXT) ? 1 : 4);
  if (g->prompt_len == 0 || bytes > QK_MAX_PROMPT_BYTES) return 0;
  return QK_GENERATE_FIXED + bytes <= len;
}

/* One submission being built (too big for the stack). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(key_size, 4);
  __uint(value_size, sizeof(struct qk_submission));
  __uint(max_entries, 1);
} qk_scratch SEC(".maps");

/* Validates a generate request (the whole datagram), applies the source's
 * rate limit and queues it for the daemon. */
static __always_inline int submit(struct xdp_md* ctx, __u32 off, __u32 len, __u32 saddr, __u16 sport) {
  __u32 zero = 0;
  struct qk_submission* rec = bpf_map_lookup_elem(&qk_scratch, &zero);
  if (!rec) return XDP_DROP;
  if (len < QK_GENERATE_FIXED || len > sizeof(struct qk_generate) ||
      bpf_xdp_load_bytes(ctx, off, &rec->data, len) != 0 || !valid_generate(&rec->data, len)) {
    count(QK_C_MALFORMED);
    return XDP_DROP;
  }
  if (!rate_ok(saddr)) {
    count(QK_C_RATE_LIMITED);
    return XDP_DROP;
  }
  rec->origin = QK_ORIGIN_UDP;
  rec->len = len;
  rec->saddr = saddr;
  rec->sport = sport;
  rec->reserved = 0;
  rec->received_ns = bpf_ktime_get_ns();
  if (bpf_ringbuf_output(&qk_submit, rec, sizeof(*rec), 0) != 0) {
    count(QK_C_SHED);
    return XDP_DROP;
  }
  count(QK_C_SUBMITTED);
  return XDP_DROP;
}

static __always_inline struct qk_result_slot* slot_of(const char* session) {
  __u32* idx = bpf_map_lookup_elem(&qk_sessions, session);
  if (!idx) return 0;
  __u32 key = *idx;
  return bpf_map_lookup_elem(&qk_results, &key);
}

static __always_inline int cancel(const struct qk_hdr* h) {
  struct qk_result_slot* s = slot_of(h->session);
  if (s && s->request_id == h->request_id) {
    s->cancel = h->request_id;
    count(QK_C_CANCELS);
  }
  return XDP_DROP;
}

/* Rewrites the poll (sizeof(struct qk_answer) bytes at `off`) into its answer. */
static __always_inline void fill_answer(struct xdp_md* ctx, __u32 off, struct qk_hdr* h) {
  struct qk_answer a = {};
  a.hdr = *h;
  a.hdr.kind = QK_ANSWER;
  struct qk_result_slot* s = slot_of(h->session);
  if (!s) {
    a.status = QK_ST_UNKNOWN;
  } else if (s->request_id != h->request_id) {
    a.status = QK_ST_PENDING;
  } else {
    /* finish before produced: the daemon publishes the last entries, then the
     * finish, so a finished answer always carries the final count. x86 keeps
     * loads in order; other architectures would need load-acquire here. */
    __u32 finish = *(volatile __u32*)&s->finish;
    __u32 produced = *(volatile __u32*)&s->produced;
    __u32 from = h->from_index;
    if (from > s->acked && from <= produced) s->acked = from;
    s->last_poll_ns = bpf_ktime_get_ns();
    a.status = QK_ST_OK;
    a.finish = finish;
    a.error = s->error;
    a.produced = produced;
    a.positions = s->positions;
    a.prompt_tokens = s->prompt_tokens;
    a.cached_tokens = s->cached_tokens;
    a.tokens = s->tokens;
    __u32 n = 0;
#pragma unroll
    for (int i = 0; i < QK_ANSWER_TOKENS; i++) {
      __u32 seq = from + i;
      if (seq >= produced) break;
      struct qk_token* t = &s->ring[seq & (QK_RING - 1)];
      if (t->seq != seq) {
        a.error = QK_E_LOST;
        break;
      }
      bpf_xdp_store_bytes(ctx, off + sizeof(struct qk_answer) - sizeof(a.entries) + i * sizeof(struct qk_token), t,
                          sizeof(struct qk_token));
      n++;
    }
    a.count = n;
    /* A request that took the slot meanwhile: say pending rather than mix two requests. */
    if (s->request_id != h->request_id) {
      a.status = QK_ST_PENDING;
      a.count = 0;
    }
  }
  bpf_xdp_store_bytes(ctx, off, &a, sizeof(struct qk_answer) - sizeof(a.entries));
}

SEC("xdp")
int qk_endpoint(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
  struct iphdr* ip = (void*)(eth + 1);
  if ((void*)(ip + 1) > end || ip->protocol != IPPROTO_UDP) return XDP_PASS;
  if (ip->ihl != 5) return XDP_PASS; /* with IP options: left to the stack (no socket listens on the port) */
  struct udphdr* udp = (void*)(ip + 1);
  if ((void*)(udp + 1) > end || udp->dest != bpf_htons(QK_PORT)) return XDP_PASS;
  if (ip->frag_off & bpf_htons(0x3FFF)) {
    count(QK_C_MALFORMED); /* fragments are never valid requests */
    return XDP_DROP;
  }

  __u32 off = sizeof(*eth) + sizeof(*ip) + sizeof(*udp);
  __u32 udp_len = bpf_ntohs(udp->len);
  __u32 pkt_len = (__u32)((long)end - (long)data);
  if (udp_len < sizeof(*udp) || off - sizeof(*udp) + udp_len > pkt_len) {
    count(QK_C_MALFORMED);
    return XDP_DROP;
  }
  __u32 len = udp_len - sizeof(*udp);
  struct qk_hdr h;
  if (len < sizeof(h) || bpf_xdp_load_bytes(ctx, off, &h, sizeof(h)) != 0 || !valid_hdr(&h)) {
    count(QK_C_MALFORMED);
    return XDP_DROP;
  }

  if (h.kind == QK_POLL && len == sizeof(struct qk_answer) && h.flags == 0) {
    fill_answer(ctx, off, &h);
    /* The answer goes back where the poll came from. */
    data = (void*)(long)ctx->data;
    end = (void*)(long)ctx->data_end;
    eth = data;
    ip = (void*)(eth + 1);
    udp = (void*)(ip + 1);
    if ((void*)(udp + 1) > end) return XDP_DROP;
    unsigned char mac[ETH_ALEN];
    __builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
    __builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
    __builtin_memcpy(eth->h_source, mac, ETH_ALEN);
    __u32 a = ip->saddr;
    ip->saddr = ip->daddr;
    ip->daddr = a; /* the IP checksum is a sum: swapping its words leaves it valid */
    __u16 p = udp->source;
    udp->source = udp->dest;
    udp->dest = p;
    udp->check = 0; /* IPv4: no checksum */
    count(QK_C_POLLS);
    return XDP_TX;
  }
  if (h.kind == QK_CANCEL && len == sizeof(h) && h.flags == 0 && h.from_index == 0) {
    if (!rate_ok(ip->saddr)) {
      count(QK_C_RATE_LIMITED);
      return XDP_DROP;
    }
    return cancel(&h);
  }
  if (h.kind == QK_GENERATE) return submit(ctx, off, len, ip->saddr, udp->source);
  count(QK_C_MALFORMED);
  return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
