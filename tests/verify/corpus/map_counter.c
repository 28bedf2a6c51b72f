// Counts packets per EtherType bucket in an array map (lookup checked for NULL).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u64);
} ethertype_counts SEC(".maps");

SEC("xdp")
int map_counter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	__u32 key = eth->h_proto & 0xff;
	__u64 *count = bpf_map_lookup_elem(&ethertype_counts, &key);
	if (!count)
		return XDP_ABORTED;
	__sync_fetch_and_add(count, 1);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
