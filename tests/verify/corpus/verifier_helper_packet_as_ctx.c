#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int packet_as_ctx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 14 > data_end)
		return XDP_PASS;
	/* bpf_xdp_adjust_head wants the context, not a packet pointer. */
	if (bpf_xdp_adjust_head((struct xdp_md *)data, 4))
		return XDP_DROP;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
