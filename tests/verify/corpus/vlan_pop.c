// Pops one 802.1Q tag: moves the MAC addresses 4 bytes forward and shrinks
// the head with bpf_xdp_adjust_head.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int vlan_pop(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (data + 18 > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_8021Q))
		return XDP_PASS;
	unsigned char macs[12];
	__builtin_memcpy(macs, data, 12);
	if (bpf_xdp_adjust_head(ctx, 4))
		return XDP_ABORTED;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + 14 > data_end)
		return XDP_ABORTED;
	__builtin_memcpy(data, macs, 12);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
