#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u32);
} seen SEC(".maps");

SEC("xdp")
int uninit_update(struct xdp_md *ctx)
{
	__u32 key = ctx->rx_queue_index, one = 1;
	__u64 mode;
	bpf_map_update_elem(&seen, &key, &one, mode);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
