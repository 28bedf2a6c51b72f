// seed: splices, comments and literals the scanner must see through
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#inc\
lude "x.h"
/* #include <stdio.h> */ char s[] = "#include <stdlib.h>";
SEC("xdp") int prog(struct xdp_md *ctx) { asm volatile("r0 = 0"); return XDP_PASS; }
char _license[] SEC("license") = "GPL";
