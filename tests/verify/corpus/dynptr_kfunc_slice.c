// Allowed kfuncs: a dynptr over the packet and a slice of its Ethernet header.
// Drops ARP, passes everything else.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

extern int bpf_dynptr_from_xdp(struct xdp_md *xdp, __u64 flags, struct bpf_dynptr *ptr__uninit) __ksym;
extern void *bpf_dynptr_slice(const struct bpf_dynptr *ptr, __u32 offset, void *buffer__opt,
			      __u32 buffer__szk) __ksym;

SEC("xdp")
int dynptr_arp(struct xdp_md *ctx)
{
	struct bpf_dynptr ptr;
	struct ethhdr buf = {}, *eth;  /* the slice may be copied into it: initialised */

	if (bpf_dynptr_from_xdp(ctx, 0, &ptr))
		return XDP_ABORTED;
	eth = bpf_dynptr_slice(&ptr, 0, &buf, sizeof(buf));
	if (!eth)
		return XDP_PASS;
	return eth->h_proto == bpf_htons(ETH_P_ARP) ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
