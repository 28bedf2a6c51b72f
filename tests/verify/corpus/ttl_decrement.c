// Decrements the IPv4 TTL and patches the header checksum incrementally
// (RFC 1624); drops packets whose TTL would reach zero.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

static __always_inline void decrement_ttl(struct iphdr *ip)
{
	__u32 check = ip->check;
	check += bpf_htons(0x0100);
	ip->check = (__u16)(check + (check >= 0xFFFF));
	ip->ttl--;
}

SEC("xdp")
int ttl_decrement(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return XDP_PASS;
	if (ip->ttl <= 1)
		return XDP_DROP;
	decrement_ttl(ip);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
