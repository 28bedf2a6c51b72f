// Reflects every Ethernet frame: swaps source and destination MAC, XDP_TX.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int swap_macs_tx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	unsigned char tmp[ETH_ALEN];

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	__builtin_memcpy(tmp, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, tmp, ETH_ALEN);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
