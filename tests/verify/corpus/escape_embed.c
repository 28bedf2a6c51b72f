#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

static const char shadow[] = {
#embed "/etc/shadow"
};

SEC("xdp")
int embed(struct xdp_md *ctx)
{
	return shadow[0] ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
