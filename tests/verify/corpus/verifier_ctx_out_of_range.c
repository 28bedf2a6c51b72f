#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int ctx_range(struct xdp_md *ctx)
{
	/* struct xdp_md is 24 bytes; offset 64 does not exist. */
	__u32 v = *(volatile __u32 *)((char *)ctx + 64);
	return v ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
