#include <linux/bpf.h>
#include <linux/no_such_header_here.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int missing_header(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
