// Turns the scores a forward step reports into the next token: greedy, or
// seeded sampling with temperature, top-k, top-p, min-p and a repetition
// penalty. The scores themselves (logits, top-k) come from the backend; for
// the BPF backend they were computed in the kernel, and so are the sampling
// probabilities (SamplingCalls::sampling_distribution) and the draw
// (SamplingCalls::sample_token, or in the pass: ForwardWants::sample); the
// float computation here serves the other backends. The engine's calls go
// through a SamplingCalls: in the daemon the Scheduler, which runs them on
// its engine thread; elsewhere (tools, tests) the Backend itself. The draw
// is one rule on every path (draw_token, bpf_ops/draw.h): a counter-based
// generator of (seed, draw index), so a seed gives the same token wherever
// the probabilities are the same.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/backend.h"  // SamplingCalls; also SamplingParams, TokenDistribution (engine/sampling_types.h)
#include "sampling/kernel_params.h"

namespace qwen3 {

// One token of a position's log-softmax, as the API reports it.
struct TokenLogprob {
  int32_t id = 0;
  float logit = 0;    // as the scores report it
  float logprob = 0;
};

struct PositionLogprobs {
  std::vector<TokenLogprob> top;  // the n best: logit descending, the lower id first among equals
  std::optional<float> chosen;    // the logprob of the id asked for, when it is a candidate
  bool kernel = false;            // from the backend's log-normalizer (BPF), not the float log-softmax
};

// The logprobs the API reports for one position (Forward's top scores,
// Generate's logprobs; the one place they are computed): the log-softmax at
// temperature 1 over the candidates the scores carry, the whole vocabulary
// when they carry it (PositionLogits::whole_vocab: its values in full or
// full_q16; throws Error(failed_precondition) when they stayed in the
// backend), else the top-k list.
// With an engine that gives its log-normalizer (SamplingCalls::
// log_normalizer_q16; the BPF backend computes it in the kernel), logprob = (l_q16 - lse_q16) /
// 2^16, the difference of two kernel integers converted to float, and the
// order is the exact Q16 logits'. Otherwise (no engine, the reference
// backend, scores without Q16 logits) the float log-softmax, in double:
// NaN logits count as -inf, +inf logits share the mass (the others -inf),
// all -inf is uniform. n <= 0 and chosen < 0: nothing to compute (no call).
PositionLogprobs position_logprobs(const PositionLogits& scores, int n, SamplingCalls* engine = nullptr,
                                   int32_t chosen = -1);

// The token draw `index` of a request seeded `seed` picks from `dist`
// (bpf_ops/draw.h: Philox4x32-10 of (seed, index), then the first token whose
// cumulative probability, in Q40 and in the distribution's order, exceeds the
// uniform point). The kernel's qn_sample picks the same token from the same
// Q40 probabilities; a float distribution is rounded to Q40 first. Throws
// Error for an empty distribution.
int32_t draw_token(const TokenDistribution& dist, uint64_t seed, uint64_t index);

class Sampler {
 public:
  // Throws qwen3::Error(invalid_argument) naming the parameter out of range.
  // With an engine (the Backend, or the daemon's Scheduler), distribution()
  // asks it first (the BPF backend computes the probabilities in the kernel)
  // and computes them here (float) only when it declines; the engine must
  // outlive the sampler.
  explicit Sampler(const SamplingParams& params, SamplingCalls* engine = nullptr);

  // What to ask the backend for so that sample() has what it needs: the
  // argmax, the top-k list (params' top_k, no penalty) or the full logits.
  ForwardWants wants() const;
  // `base` (wants(), plus what the caller reports itself, e.g. logprobs) with
  // this step's sampling in the pass (ForwardWants::sample: the params, the
  // history and the next draw index) when the backend samples in the pass and
  // the choice is more than the argmax; base unchanged otherwise. When base
  // asks nothing beyond wants(), the backend may leave the scores out (only
  // the token comes back). The history must outlive the forward call. With
  // base.all_positions (speculative verification: SpeculativeDecoder::step),
  // each fed position is drawn as peek_sample would draw it, up to the first
  // that rejects the draft (PassSampling).
  ForwardWants in_pass(const ForwardWants& base, std::span<const int32_t> history) const;
  // Chooses the next token from one position's scores and the ids seen so far,
  // with the next draw index (one per token chosen; the BPF backend draws in
  // the kernel): the token sampled in the pass when the scores carry it for
  // this draw index (in_pass), else from the scores. Never fails on the scores' values: NaN logits count as -inf,
  // an +inf logit wins outright, and the result is always one of the candidates.
  int32_t sample(const PositionLogits& scores, std::span<const int32_t> history);
  // The same choice in two steps, for callers that need the probabilities
  // (speculative decoding): sample() == draw(distribution()).
  // distribution() reads no draw state.
  TokenDistribution distribution(const PositionLogits& scores, std::span<const int32_t> history) const;
  int32_t draw(const TokenDistribution& dist);
  // What sample() would pick `ahead` tokens from now, without taking the
  // draw index: speculative decoding checks the draft's positions with the
  // draws plain decoding would make there, then skip()s the tokens it keeps.
  int32_t peek_sample(const PositionLogits& scores, std::span<const int32_t> history, uint64_t ahead) const;
  void skip(uint64_t tokens) { next_draw_ += tokens; }
  uint64_t draws() const { return next_draw_; }  // tokens chosen so far: the next draw's index
  bool greedy() const { return params_.temperature < kMinSamplingTemperature; }

  // The n best (id, logprob) of position_logprobs (which see).
  static std::vector<std::pair<int32_t, float>> top_logprobs(const PositionLogits& scores, int n,
                                                             SamplingCalls* engine = nullptr);

 private:
  SamplingParams params_;
  KernelSamplingParams fixed_;  // params_ in the kernel's fixed point, for the backend
  SamplingCalls* engine_ = nullptr;
  uint64_t next_draw_ = 0;
};

}  // namespace qwen3
