#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int classifier(struct __sk_buff *skb)
{
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
