#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#define SHADOW "/etc/shadow"
#include SHADOW

SEC("xdp")
int macro_include(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
