#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int negative_len(struct xdp_md *ctx)
{
	char buf[64] = {};
	int len = (int)ctx->rx_queue_index - 100;
	/* len may be negative or larger than buf. */
	if (bpf_xdp_load_bytes(ctx, 0, buf, len))
		return XDP_DROP;
	return buf[0] ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
