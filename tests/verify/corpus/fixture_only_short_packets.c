// Passes every packet; its only fixture is a 10-byte frame the kernel will
// not run, so nothing can be checked: error, not pass.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int pass_all(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
