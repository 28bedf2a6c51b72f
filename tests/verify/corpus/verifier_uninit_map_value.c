#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct stats {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, struct stats);
} flows SEC(".maps");

SEC("xdp")
int uninit_value(struct xdp_md *ctx)
{
	__u32 key = ctx->rx_queue_index;
	struct stats s;
	/* s.bytes is never set, yet the whole struct is copied into the map. */
	s.packets = 1;
	bpf_map_update_elem(&flows, &key, &s, BPF_ANY);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
