#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int long_loop(struct xdp_md *ctx)
{
	volatile __u64 acc = 0;
	/* Bounded, but far beyond what the verifier walks (1M instructions). */
	for (__u32 i = 0; i < 5000000; i++)
		acc += i;
	return acc ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
