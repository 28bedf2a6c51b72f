#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#inc\
lude "/etc/shadow"

SEC("xdp")
int splice(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
