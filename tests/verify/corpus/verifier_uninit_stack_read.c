#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int uninit_stack(struct xdp_md *ctx)
{
	char buf[16];
	volatile char *p = buf;
	buf[0] = 1;
	/* buf[5] was never written. */
	return p[5] ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
