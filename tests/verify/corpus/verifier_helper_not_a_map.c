#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

__u64 counters[4];

SEC("xdp")
int not_a_map(struct xdp_md *ctx)
{
	__u32 key = 0;
	/* A global array is not a BPF map. */
	__u64 *v = bpf_map_lookup_elem(counters, &key);
	return v ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
