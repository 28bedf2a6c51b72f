// What sampling asks and what it gets, as plain data: the parameters of a
// request (as the API gives them, and converted to the kernel's fixed point),
// and one position's distribution over the next token. They live with the
// engine so that a backend can compute the distribution itself
// (Backend::sampling_distribution, or in the forward pass: ForwardWants::
// sample; the BPF backend does it in the kernel). Their defaults, validation
// and the conversion are daemon/sampling's.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace qwen3 {

// Temperatures below this mean greedy (argmax). Dividing logits by a smaller
// one only magnifies float rounding (1/T overflows to inf below ~3e-39), and
// at 1e-3 a logit gap of 0.02 already gives the runner-up e^-20 of the best.
inline constexpr float kMinSamplingTemperature = 1e-3f;

struct SamplingParams {
  float temperature = 0.0f;         // < kMinSamplingTemperature (0 included): greedy (argmax)
  int top_k = 0;                    // 0: no top-k cut
  float top_p = 1.0f;               // 1: no nucleus cut
  float min_p = 0.0f;               // 0: no min-p cut
  float repetition_penalty = 1.0f;  // 1: none; >1 discourages tokens already in the history
  uint64_t seed = 0;
};

// SamplingParams in the fixed point of the kernel's qn_sample (bpf_ops/
// layout.h, struct qn_sample_hdr: temperature = tm * 2^-te, penalty = pm *
// 2^-pe, min_p * 2^44, top_p * 2^32), converted once per request by
// daemon/sampling (kernel_params.h: kernel_params); the engine copies it into
// the program's header as it is (no arithmetic).
struct KernelSamplingParams {
  bool greedy = true;    // temperature < kMinSamplingTemperature: the (penalised) argmax
  bool penalty = false;  // repetition_penalty != 1
  uint32_t top_k = 0;    // 0: no top-k cut
  uint32_t tm = 0;
  int32_t te = 0;
  uint32_t pm = 0;
  uint32_t pe = 0;
  uint64_t min_p_q44 = 0;
  uint64_t top_p_q32 = uint64_t(1) << 32;  // 2^32: no top-p cut
  uint64_t seed = 0;
};

// What one position's sampling may pick: the kept candidates with their
// probabilities (summing to 1 up to rounding), in candidate order (ids
// ascending for full logits, the top-k list's order otherwise): the order the
// seeded draw walks (bpf_ops/draw.h), and the kernel's, which keeps them
// without sorting. Greedy: one token with probability 1. Computed in fixed
// point (BPF backend), tokens whose probability rounds to 0 are left out.
struct TokenDistribution {
  std::vector<std::pair<int32_t, double>> tokens;
  // The probability of `id` (0 when it was cut).
  double prob_of(int32_t id) const {
    for (const auto& [t, p] : tokens)
      if (t == id) return p;
    return 0.0;
  }
};

}  // namespace qwen3
