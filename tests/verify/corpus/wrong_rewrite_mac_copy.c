// "Swaps" the MACs by copying the source over the destination: both end up equal.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int mac_copy(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
