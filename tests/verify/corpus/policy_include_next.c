#include_next <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int next(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
