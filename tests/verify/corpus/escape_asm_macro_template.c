// An asm template assembled by a macro: refused (the policy cannot see what the
// macro makes of it).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define DIRECTIVE(x) #x
SEC("xdp")
int asm_macro(struct xdp_md *ctx)
{
	asm volatile(DIRECTIVE(.incbin "/etc/passwd"));
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
