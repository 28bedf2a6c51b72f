#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int ctx_narrow(struct xdp_md *ctx)
{
	/* A 1-byte read in the middle of the data_end field is not a valid context access. */
	__u8 b = *(volatile __u8 *)((char *)ctx + 5);
	return b ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
