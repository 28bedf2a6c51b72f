// Parses up to two 802.1Q/802.1ad tags; drops VLAN 100 (outer or inner).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct vlan_hdr {
	__be16 tci;
	__be16 encapsulated_proto;
};

SEC("xdp")
int vlan_filter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	__u16 proto = eth->h_proto;
	struct vlan_hdr *vh = (void *)(eth + 1);
#pragma unroll
	for (int i = 0; i < 2; i++) {
		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		if ((void *)(vh + 1) > data_end)
			return XDP_DROP;
		if ((bpf_ntohs(vh->tci) & 0x0fff) == 100)
			return XDP_DROP;
		proto = vh->encapsulated_proto;
		vh++;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
