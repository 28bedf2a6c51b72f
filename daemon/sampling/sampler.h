// Turns the scores a forward step reports into the next token: greedy, or
// seeded sampling with temperature, top-k, top-p, min-p and a repetition
// penalty. The scores themselves (logits, top-k) come from the backend; for
// the BPF backend they were computed in the kernel.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/backend.h"

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
// probabilities (summing to 1 up to rounding). Best first when a cut was
// applied; when nothing is cut (every token of the full logits kept), in
// candidate order, since a draw needs no order and sorting ~150k ids per token
// would cost more than the draw. Greedy: one token with probability 1.
struct TokenDistribution {
  std::vector<std::pair<int32_t, double>> tokens;
  // The probability of `id` (0 when it was cut).
  double prob_of(int32_t id) const;
};

class Sampler {
 public:
  // Throws qwen3::Error(invalid_argument) naming the parameter out of range.
  explicit Sampler(const SamplingParams& params);

  // What to ask the backend for so that sample() has what it needs.
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
  // A uniform draw in [0, 1) from the same seeded generator.
  double uniform();
  bool greedy() const { return params_.temperature < kMinSamplingTemperature; }

  // log-softmax over what the position reports (full logits when present,
  // otherwise the top-k candidates), for the logprobs the API returns.
  static std::vector<std::pair<int32_t, float>> top_logprobs(const PositionLogits& scores, int n);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

}  // namespace qwen3
