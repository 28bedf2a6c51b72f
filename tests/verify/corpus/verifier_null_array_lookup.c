#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

SEC("xdp")
int null_array(struct xdp_md *ctx)
{
	__u32 key = ctx->rx_queue_index;
	__u64 *value = bpf_map_lookup_elem(&counters, &key);
	*value += 1;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
