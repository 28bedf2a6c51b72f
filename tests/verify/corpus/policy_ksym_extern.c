#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern const void init_task __ksym;

SEC("xdp")
int ksym(struct xdp_md *ctx)
{
	return (long)&init_task ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
