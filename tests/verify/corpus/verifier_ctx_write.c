#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int ctx_write(struct xdp_md *ctx)
{
	/* The context is read-only for XDP. */
	ctx->rx_queue_index = 0;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
