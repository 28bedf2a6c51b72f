// Redirects IPv4 through devmap slot 0, drops the rest. Its fixture file
// fills slot 0 with the loopback ifindex, so bpf_redirect_map returns
// XDP_REDIRECT under test-run (nothing is transmitted).
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
