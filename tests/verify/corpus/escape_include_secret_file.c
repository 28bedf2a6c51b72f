// @SECRET@ is replaced by the test with the path of a file holding a random marker.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "@SECRET@"

SEC("xdp")
int secret(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
