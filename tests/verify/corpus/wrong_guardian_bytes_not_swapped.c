// Sends the frame back without swapping the addresses: the Guardian
// packet_bytes fixture's expected bytes catch it.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_swap(struct xdp_md *ctx)
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
