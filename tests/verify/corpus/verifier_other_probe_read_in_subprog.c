// The kernel-memory read hides in a BPF subprogram (appended to the program
// only when it is loaded): still refused before any fixture runs.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

static __noinline int peek(void *dst, const void *kernel_ptr)
{
	return bpf_probe_read_kernel(dst, 8, kernel_ptr);
}

SEC("xdp")
int kernel_read_subprog(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	if (data + 8 > data_end)
		return XDP_PASS;
	__u64 buf = 0;
	peek(&buf, (void *)ctx);
	__builtin_memcpy(data, &buf, 8);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
