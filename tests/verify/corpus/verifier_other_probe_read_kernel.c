// Tries to copy kernel memory into the packet: refused before loading.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int kernel_read(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 8 > data_end)
		return XDP_PASS;
	bpf_probe_read_kernel(data, 8, (void *)ctx);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
