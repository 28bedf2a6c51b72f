// A kernel-memory reader: looks up the host's TCP listener and would walk
// sk->sk_socket->file->f_cred->uid into the packet. bpf_sk_lookup_tcp is a
// pointer-returning socket lookup: refused before the verifier runs.
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int sk_lookup(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *data_end = (void *)(long)ctx->data_end;
	struct bpf_sock_tuple tuple = {};
	__u32 *out = data;
	if ((void *)(out + 2) > data_end)
		return XDP_PASS;
	tuple.ipv4.dport = bpf_htons(22);
	struct bpf_sock *sk = bpf_sk_lookup_tcp(ctx, &tuple, sizeof(tuple.ipv4), -1, 0);
	if (!sk)
		return XDP_PASS;
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	if (tp && tp->inet_conn.icsk_inet.sk.sk_socket) {
		struct file *f = tp->inet_conn.icsk_inet.sk.sk_socket->file;
		out[0] = f->f_cred->uid.val;
		out[1] = f->f_inode->i_ino;
	}
	bpf_sk_release(sk);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
