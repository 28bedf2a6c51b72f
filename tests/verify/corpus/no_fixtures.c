// A correct program submitted without fixtures: verified, behaviour not checked.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int no_fixtures(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
