#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int first(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp")
int second(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
