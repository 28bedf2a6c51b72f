/* The forward-pass programs with weights in mmapable array maps (default path). */
#include "ops_matmul.h"
#include "ops_attention.h"
#include "ops_embed.h"
#include "ops_rope.h"
#include "ops_topk.h"
#include "ops_sample.h"
#include "ops_drive.h" /* the kernel driver: autoloaded only when the engine enables it */

char LICENSE[] SEC("license") = "GPL";
