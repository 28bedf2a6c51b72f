// Drops TCP to port 23 (telnet) and UDP to port 69 (tftp); IPv4 with options handled
// (the ports are read with bpf_xdp_load_bytes at the variable offset: the loader's
// unprivileged verifier refuses variable offsets on packet pointers).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int port_filter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return XDP_PASS;
	__u32 ihl = ip->ihl * 4;
	if (ihl < sizeof(*ip))
		return XDP_DROP;
	const __u32 l4 = sizeof(*eth) + (ihl & 0x3c);
	if (ip->protocol == IPPROTO_TCP) {
		struct tcphdr tcp;
		if (bpf_xdp_load_bytes(ctx, l4, &tcp, sizeof(tcp)))
			return XDP_PASS;
		if (tcp.dest == bpf_htons(23))
			return XDP_DROP;
	} else if (ip->protocol == IPPROTO_UDP) {
		struct udphdr udp;
		if (bpf_xdp_load_bytes(ctx, l4, &udp, sizeof(udp)))
			return XDP_PASS;
		if (udp.dest == bpf_htons(69))
			return XDP_DROP;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
