// perf_event_array maps are accepted: an unattached program writes nowhere
// (no perf event is installed, bpf_perf_event_output returns an error the
// program ignores). Passes everything, reporting the frame length.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

SEC("xdp")
int perf_len(struct xdp_md *ctx)
{
	__u64 len = bpf_xdp_get_buff_len(ctx);  /* data_end - data is a pointer difference, refused */
	bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, &len, sizeof(len));
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
