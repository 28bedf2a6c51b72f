#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int uninit_flags(struct xdp_md *ctx)
{
	__u64 flags;
	/* flags is never set: the helper's second argument register is never written. */
	return bpf_redirect(ctx->rx_queue_index, flags);
}

char LICENSE[] SEC("license") = "GPL";
