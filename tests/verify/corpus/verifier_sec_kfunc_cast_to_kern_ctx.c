// bpf_cast_to_kern_ctx turns the context into a BTF pointer to struct
// xdp_buff, from which rxq->dev and the whole net_device could be read.
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

SEC("xdp")
int kern_ctx(struct xdp_md *ctx)
{
	struct xdp_buff *xdp = bpf_cast_to_kern_ctx(ctx);
	return xdp->rxq->dev->ifindex == 1 ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
