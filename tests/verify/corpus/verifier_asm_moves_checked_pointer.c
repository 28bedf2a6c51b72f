// A lowering-artifact style bug: the bounds check covers p, then inline
// assembly moves p 15 bytes further, one past what was proven. The verifier
// rejects the read (packet_bounds).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int asm_moves(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	unsigned char *p = data;
	if ((void *)(p + 15) > data_end)
		return XDP_PASS;
	asm volatile("%[p] += 15" : [p] "+r"(p));
	return *p == 0 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
