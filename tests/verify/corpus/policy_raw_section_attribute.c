#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

__attribute__((section("kprobe/do_sys_open"), used))
int sneaky(void *regs)
{
	return 0;
}

SEC("xdp")
int visible(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
