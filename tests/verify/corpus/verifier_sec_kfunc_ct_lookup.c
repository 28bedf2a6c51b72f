// A pointer-returning kfunc lookup: conntrack entries are kernel objects
// (vmlinux.h declares the kfunc). Refused before the verifier runs.
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int ct_lookup(struct xdp_md *ctx)
{
	struct bpf_sock_tuple tuple = {};
	struct bpf_ct_opts opts = {.netns_id = -1, .l4proto = 6};
	struct nf_conn *ct = bpf_xdp_ct_lookup(ctx, &tuple, sizeof(tuple.ipv4), &opts, sizeof(opts));
	if (!ct)
		return XDP_PASS;
	int mark = ct->mark;
	bpf_ct_release(ct);
	return mark ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
