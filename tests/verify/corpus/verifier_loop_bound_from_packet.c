#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int packet_bound(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 4 > data_end)
		return XDP_PASS;
	/* The trip count is a 32-bit number taken from the packet. */
	__u32 n = *(__u32 *)data;
	volatile __u32 acc = 0;
	for (__u32 i = 0; i < n; i++)
		acc += i;
	return acc ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
