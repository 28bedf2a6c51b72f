// Returns (the low half of) a packet pointer instead of an action. A root
// loader's verifier accepts it; the fixture shows the verdict is not an action.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int pointer_verdict(struct xdp_md *ctx)
{
	return (long)ctx->data;
}

char LICENSE[] SEC("license") = "GPL";
