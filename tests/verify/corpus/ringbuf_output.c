// Ring buffer maps are accepted. Sends each frame's length to a ring buffer
// nobody reads, then passes the frame.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} lengths SEC(".maps");

SEC("xdp")
int ring_len(struct xdp_md *ctx)
{
	__u64 len = bpf_xdp_get_buff_len(ctx);  /* data_end - data is a pointer difference, refused */
	__u64 *slot = bpf_ringbuf_reserve(&lengths, sizeof(*slot), 0);
	if (slot) {
		*slot = len;
		bpf_ringbuf_submit(slot, 0);
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
