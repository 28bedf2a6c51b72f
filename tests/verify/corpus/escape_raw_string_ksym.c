// A __ksym extern (a kernel variable: kernel memory) hidden between raw strings.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

static const char *a = R"x(" /* )x";
extern const int bpf_prog_active __ksym;
static const char *b = R"x(" */ )x";

SEC("xdp")
int raw_ksym(struct xdp_md *ctx)
{
	return bpf_prog_active + a[0] == b[0] ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
