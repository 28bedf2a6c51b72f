#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int implicit(struct xdp_md *ctx)
{
	return classify_packet(ctx);
}

char LICENSE[] SEC("license") = "GPL";
