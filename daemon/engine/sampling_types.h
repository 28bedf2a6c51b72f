// What sampling asks and what it gets, as plain data: the parameters of a
// request and one position's distribution over the next token. They live
// with the engine so that a backend can compute the distribution itself
// (Backend::sampling_distribution: the BPF backend does it in the kernel);
// daemon/sampling re-exports them with the Sampler.
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
