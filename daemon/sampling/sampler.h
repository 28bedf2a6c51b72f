// Turns the scores a forward step reports into the next token: greedy, or
// seeded sampling with temperature, top-k, top-p, min-p and a repetition
// penalty. The scores themselves (logits, top-k) come from the backend; for
// the BPF backend they were computed in the kernel, and so are the sampling
// probabilities (Backend::sampling_distribution); the float computation here
// serves the other backends. The uniform draw is always here, seeded.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/backend.h"  // also SamplingParams, TokenDistribution (engine/sampling_types.h)

namespace qwen3 {

class Sampler {
 public:
  // Throws qwen3::Error(invalid_argument) naming the parameter out of range.
  // With a backend, distribution() asks it first (the BPF backend computes the
  // probabilities in the kernel) and computes them here (float) only when it
  // declines; the backend must outlive the sampler.
  explicit Sampler(const SamplingParams& params, Backend* backend = nullptr);

  // What to ask the backend for so that sample() has what it needs: the
  // argmax, the top-k list (params' top_k, no penalty) or the full logits.
  ForwardWants wants() const;
  // Chooses the next token from one position's scores and the ids seen so far.
  // Never fails on the scores' values: NaN logits count as -inf, an +inf logit
  // wins outright, and the result is always one of the candidates.
  int32_t sample(const PositionLogits& scores, std::span<const int32_t> history);
  // The same choice in two steps, for callers that need the probabilities
  // (speculative decoding's accept/reject rule): sample() == draw(distribution()).
  // distribution() reads no random state.
  TokenDistribution distribution(const PositionLogits& scores, std::span<const int32_t> history) const;
  int32_t draw(const TokenDistribution& dist);
  // A draw from `dist` without `excluded` (whose probability is p): the uniform
  // draw is scaled to [0, 1 - p) and the walk skips it, so the probabilities
  // themselves are used as computed (in BPF for the BPF backend). `dist` must
  // hold another token.
  int32_t draw_excluding(const TokenDistribution& dist, int32_t excluded);
  // A uniform draw in [0, 1) from the same seeded generator.
  double uniform();
  bool greedy() const { return params_.temperature < kMinSamplingTemperature; }

  // log-softmax over what the position reports (full logits when present,
  // otherwise the top-k candidates), for the logprobs the API returns.
  static std::vector<std::pair<int32_t, float>> top_logprobs(const PositionLogits& scores, int n);

 private:
  SamplingParams params_;
  Backend* backend_ = nullptr;
  std::mt19937_64 rng_;
};

}  // namespace qwen3
