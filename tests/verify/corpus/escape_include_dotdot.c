#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "../../etc/passwd"

SEC("xdp")
int dotdot(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
