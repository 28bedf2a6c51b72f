#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct flow_key {
	__u32 ifindex;
	__u32 queue;
	__u64 cookie;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct flow_key);
	__type(value, __u32);
} table SEC(".maps");

SEC("xdp")
int uninit_key(struct xdp_md *ctx)
{
	struct flow_key key;
	key.ifindex = ctx->ingress_ifindex;
	key.queue = ctx->rx_queue_index;
	/* key.cookie is never written, yet the whole key goes to the helper. */
	__u32 *v = bpf_map_lookup_elem(&table, &key);
	return v ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
