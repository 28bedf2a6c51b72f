// IPv6: drops ICMPv6 echo requests (type 128), passes everything else.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/icmpv6.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int ipv6_echo(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > data_end)
		return XDP_PASS;
	if (ip6->nexthdr != IPPROTO_ICMPV6)
		return XDP_PASS;
	struct icmp6hdr *icmp = (void *)(ip6 + 1);
	if ((void *)(icmp + 1) > data_end)
		return XDP_PASS;
	if (icmp->icmp6_type == 128)
		return XDP_DROP;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
