// An assembler .incbin hidden between raw strings (a comment to a lexer that
// does not know them, code to clang).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

static const char *a = R"x(" /* )x";
asm(".pushsection .rodata\n.incbin \"/etc/passwd\"\n.popsection");
static const char *b = R"x(" */ )x";

SEC("xdp")
int raw_incbin(struct xdp_md *ctx)
{
	return a[0] == b[0] ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
