// Would SIGKILL whoever test-runs it: refused before loading.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int kill_runner(struct xdp_md *ctx)
{
	long err = bpf_send_signal(9);
	return err ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
