// 1 KiB on the stack: the BPF backend refuses (stack limit is 512 bytes).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int big_stack(struct xdp_md *ctx)
{
	volatile char buf[1024];
	for (int i = 0; i < 1024; i++)
		buf[i] = (char)i;
	return buf[ctx->rx_queue_index & 1023] ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
