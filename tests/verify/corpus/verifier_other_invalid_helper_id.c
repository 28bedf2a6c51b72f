#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* A helper number the kernel does not have. */
static long (*no_such_helper)(void) = (void *)9999;

SEC("xdp")
int bad_helper_id(struct xdp_md *ctx)
{
	return no_such_helper() ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
