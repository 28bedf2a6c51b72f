// ".incbin" spelled with an octal escape (\056 is '.') inside an asm template.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int asm_escaped(struct xdp_md *ctx)
{
	asm volatile("\056incbin \"/etc/passwd\"");
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
