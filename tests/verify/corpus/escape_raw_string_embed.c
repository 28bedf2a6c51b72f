// #embed of a host file hidden between raw strings.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

static const char *a = R"x(" /* )x";
static const char data[] = {
#embed "/etc/passwd"
};
static const char *b = R"x(" */ )x";

SEC("xdp")
int raw_embed(struct xdp_md *ctx)
{
	return data[0] == a[0] ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
