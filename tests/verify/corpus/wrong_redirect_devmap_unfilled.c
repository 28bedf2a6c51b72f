// The same program with an empty devmap: bpf_redirect_map finds no device
// in slot 0 and returns the low bits of its flags, XDP_ABORTED, so the
// fixture expecting XDP_REDIRECT fails.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} tx_port SEC(".maps");

SEC("xdp")
int redirect_map(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_DROP;
	return bpf_redirect_map(&tx_port, 0, 0);
}

char LICENSE[] SEC("license") = "GPL";
