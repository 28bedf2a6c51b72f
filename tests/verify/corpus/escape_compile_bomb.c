// Passes the policy, but the preprocessor would have to evaluate ~7e10 tokens:
// the compiler must be stopped by the CPU/time limit.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define A0 1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+
#define A1 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0
#define A2 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1
#define A3 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2
#define A4 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3
#define A5 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4
#define A6 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5
#define A7 A6 A6 A6 A6 A6 A6 A6 A6 A6 A6 A6 A6 A6 A6 A6 A6
#define A8 A7 A7 A7 A7 A7 A7 A7 A7 A7 A7 A7 A7 A7 A7 A7 A7

#if A8 0
#define VERDICT XDP_PASS
#else
#define VERDICT XDP_DROP
#endif

SEC("xdp")
int bomb(struct xdp_md *ctx)
{
	return VERDICT;
}

char LICENSE[] SEC("license") = "GPL";
