// linux/if.h includes <sys/socket.h>: the sandbox's minimal libc headers
// make it compile. Drops frames whose EtherType is below IFNAMSIZ (16).
#include <linux/bpf.h>
#include <linux/if.h>
#include <linux/if_ether.h>
#include <stdint.h>
#include <stddef.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int xdp_ifnamsiz(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	uint16_t proto = bpf_ntohs(eth->h_proto);
	return proto < IFNAMSIZ + offsetof(struct ethhdr, h_dest) ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
