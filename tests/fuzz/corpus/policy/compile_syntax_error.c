#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int syntax(struct xdp_md *ctx)
{
	int a = 1
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
