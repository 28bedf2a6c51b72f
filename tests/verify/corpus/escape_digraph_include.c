#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
%:include "/etc/shadow"

SEC("xdp")
int digraph(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
