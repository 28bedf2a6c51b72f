#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int foreign_helper(struct xdp_md *ctx)
{
	char name[16];
	/* A cgroup-sysctl helper that XDP programs may not call. */
	long n = bpf_sysctl_get_name((void *)ctx, name, sizeof(name), 0);
	return n > 0 ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
