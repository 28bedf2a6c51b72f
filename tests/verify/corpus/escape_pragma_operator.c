#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
_Pragma("GCC dependency \"/etc/shadow\"")

SEC("xdp")
int pragma_op(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
