// A helper outside the packet-program allowlist.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int comm(struct xdp_md *ctx)
{
	char name[16];
	bpf_get_current_comm(name, sizeof(name));
	return name[0] ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
