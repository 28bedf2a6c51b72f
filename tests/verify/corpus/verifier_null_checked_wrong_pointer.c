#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} bytes SEC(".maps");

SEC("xdp")
int wrong_check(struct xdp_md *ctx)
{
	__u32 k1 = 1, k2 = 2;
	__u64 *a = bpf_map_lookup_elem(&bytes, &k1);
	__u64 *b = bpf_map_lookup_elem(&bytes, &k2);
	if (!a)
		return XDP_PASS;
	/* b was never checked. */
	*a += *b;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
