// Raw string literals hide an #include from a lexer that does not know them:
// to clang, lines 6 and 8 are raw strings and line 7 is a real #include; an
// ordinary-string lexer sees "x(" then a comment from the /* to the */.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
static const char *before = R"x(" /* )x";
#include "@SECRET@"
static const char *after = R"x(" */ )x";

SEC("xdp")
int raw_include(struct xdp_md *ctx)
{
	return before[0] == after[0] ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
