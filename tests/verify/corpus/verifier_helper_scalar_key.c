#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} table SEC(".maps");

SEC("xdp")
int scalar_key(struct xdp_md *ctx)
{
	/* The key must point to memory, not be a number. */
	__u32 *v = bpf_map_lookup_elem(&table, (void *)(long)ctx->rx_queue_index);
	return v ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
