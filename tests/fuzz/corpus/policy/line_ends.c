// seed: lone CR and CR LF line ends, a splice with trailing blanks#include "/etc/passwd"
#include <linux/bpf.h>
char *s = "\  
/*";
#include "/etc/shadow"
// */
SEC("xdp") int prog(struct xdp_md *ctx) { return XDP_PASS; }