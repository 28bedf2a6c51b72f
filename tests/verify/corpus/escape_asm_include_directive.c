// Inline assembly is allowed, but not directives that read files.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int asm_include(struct xdp_md *ctx)
{
	asm volatile(".inc" "lude \"/etc/passwd\"");
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
