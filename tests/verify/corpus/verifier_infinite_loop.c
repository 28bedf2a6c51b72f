#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int spin(struct xdp_md *ctx)
{
	volatile int i = 0;
	/* i never changes: the loop never ends. */
	while (i < 10) {
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
