// The sampling probabilities in the kernel (qn_sample, bpf_ops/ops_sample.h):
// the parameters in the program's fixed point, one position's candidates and
// the history bitmap written into sample_buf, the kept set read back.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "engine/backend.h"
#include "op_args.h"

namespace qwen3::engine {

class BpfPrograms;

// The program's parameters for `params` (exact: the floats' own mantissas and
// exponents; out-of-range values clamped, docs/numerics.md) over n candidates.
qn_sample_hdr sample_params_fixed(const SamplingParams& params, uint32_t n);

// Runs qn_sample over the scores' candidates (full logits if present, else
// the top-k list). nullopt for scores a Q16 logit cannot hold (non-finite,
// |logit| >= 32768: never the kernel's own) or ids outside the vocabulary.
// Throws qwen3::Error when the program rejects its input. The caller
// serialises calls (one sample_buf).
std::optional<TokenDistribution> kernel_distribution(BpfPrograms& progs, const PositionLogits& scores,
                                                     const SamplingParams& params, std::span<const int32_t> history);

}  // namespace qwen3::engine
