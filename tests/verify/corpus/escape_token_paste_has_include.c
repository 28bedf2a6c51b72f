#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#define GLUE(a, b) a##b

#if GLUE(__has_, include)("/etc/shadow")
#define VERDICT XDP_DROP
#else
#define VERDICT XDP_PASS
#endif

SEC("xdp")
int paste(struct xdp_md *ctx)
{
	return VERDICT;
}

char LICENSE[] SEC("license") = "GPL";
