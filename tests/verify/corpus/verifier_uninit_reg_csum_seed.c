#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int uninit_seed(struct xdp_md *ctx)
{
	__be32 from = ctx->rx_queue_index, to = 0;
	__wsum seed;
	/* seed (the fifth argument) is never set. */
	__s64 sum = bpf_csum_diff(&from, 4, &to, 4, seed);
	return sum ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
