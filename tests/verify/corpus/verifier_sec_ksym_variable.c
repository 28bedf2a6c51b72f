// Kernel variables through __ksym: the untyped one gives a kernel address
// (written into the packet here), a typed one a BTF pointer into kernel
// memory. Refused before the verifier runs.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

extern const void init_task __ksym;

SEC("xdp")
int ksym(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *data_end = (void *)(long)ctx->data_end;
	__u64 *out = data;
	if ((void *)(out + 1) > data_end)
		return XDP_PASS;
	*out = (__u64)(long)&init_task;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
