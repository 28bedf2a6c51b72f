#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <linux/../../../etc/shadow>

SEC("xdp")
int through(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
