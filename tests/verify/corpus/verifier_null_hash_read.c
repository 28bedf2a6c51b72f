#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} verdicts SEC(".maps");

SEC("xdp")
int null_hash(struct xdp_md *ctx)
{
	__u32 key = ctx->rx_queue_index;
	__u32 *verdict = bpf_map_lookup_elem(&verdicts, &key);
	return *verdict;
}

char LICENSE[] SEC("license") = "GPL";
