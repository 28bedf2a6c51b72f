// A socket cast (bpf_skc_to_*): it hands out a BTF pointer to a kernel socket
// the program could walk. Refused.
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int skc_cast(struct xdp_md *ctx)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)(long)ctx->data);
	return tp ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
