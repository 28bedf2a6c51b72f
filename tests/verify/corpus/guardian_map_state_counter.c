// Counts IPv4 packets in slot 0 and other frames in slot 1 of an array map.
// Its Guardian fixture file (validator map_state) checks the counters.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

SEC("xdp")
int xdp_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	__u32 key = eth->h_proto == bpf_htons(ETH_P_IP) ? 0 : 1;
	__u64 *n = bpf_map_lookup_elem(&counters, &key);
	if (!n)
		return XDP_ABORTED;
	__sync_fetch_and_add(n, 1);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
