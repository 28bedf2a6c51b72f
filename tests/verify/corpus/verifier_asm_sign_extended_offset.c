// A lowering-artifact style bug: inline assembly sign-extends the packet-derived
// offset (a 32-bit value used as 64-bit), so it may be negative; the bounds
// check below only limits it from above and the verifier refuses the pointer
// arithmetic. asm_bound_offset is the fixed form (mask to 0..63).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int asm_signed(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	unsigned char *p = data;
	if ((void *)(p + 15) > data_end)
		return XDP_PASS;
	__s64 off = p[14];
	asm volatile("%[off] <<= 56; %[off] s>>= 56" : [off] "+r"(off));
	if (off > 63)
		return XDP_PASS;
	unsigned char *q = p + 14 + off;
	if ((void *)(q + 1) > data_end)
		return XDP_PASS;
	return *q == 0 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
