#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int undeclared(struct xdp_md *ctx)
{
	return verdict;
}

char LICENSE[] SEC("license") = "GPL";
