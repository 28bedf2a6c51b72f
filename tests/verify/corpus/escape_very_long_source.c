// The test pads this file with a comment to "pad_to_bytes", past the 256 KiB limit.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int long_source(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
