#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include </proc/self/environ>

SEC("xdp")
int environ_leak(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
