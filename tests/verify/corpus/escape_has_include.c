#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#if __has_include("/etc/shadow")
#define VERDICT XDP_DROP
#else
#define VERDICT XDP_PASS
#endif

SEC("xdp")
int probe(struct xdp_md *ctx)
{
	return VERDICT;
}

char LICENSE[] SEC("license") = "GPL";
