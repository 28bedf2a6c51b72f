// SamplingParams in the kernel's fixed point: the block qn_sample
// (bpf_ops/ops_sample.h) and the kernel driver take, converted once per
// request. The engine copies it into the program's header as it is.
#pragma once

#include "engine/sampling_types.h"

namespace qwen3 {

// Exact: the floats' own mantissas and exponents (temperature = tm * 2^-te,
// penalty = pm * 2^-pe); min_p and top_p rounded to Q44 / Q32; values the
// program cannot hold clamped (docs/numerics.md). `params` as the Sampler
// validated them.
KernelSamplingParams kernel_params(const SamplingParams& params);

}  // namespace qwen3
