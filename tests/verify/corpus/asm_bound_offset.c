// Inline BPF assembly is allowed: the asm masks a packet-derived offset to
// 0..63 in a way the verifier tracks, then bpf_xdp_load_bytes reads there
// (the loader's unprivileged verifier refuses variable offsets on packet pointers).
// Drops frames whose byte at 14 + (byte 14 & 63) is zero.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int asm_mask(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	unsigned char *p = data;
	if ((void *)(p + 15) > data_end)
		return XDP_PASS;
	__u64 off = p[14];
	asm volatile("%[off] &= 63" : [off] "+r"(off));
	unsigned char q;
	if (bpf_xdp_load_bytes(ctx, 14 + off, &q, 1))
		return XDP_PASS;
	return q == 0 ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
