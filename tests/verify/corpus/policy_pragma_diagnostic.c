#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#pragma clang diagnostic ignored "-Wall"
#pragma GCC system_header

SEC("xdp")
int pragmas(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
