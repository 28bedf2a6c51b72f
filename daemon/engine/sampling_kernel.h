// The sampling probabilities in the kernel (qn_sample, bpf_ops/ops_sample.h):
// the parameters (converted to the program's fixed point by daemon/sampling:
// KernelSamplingParams) and the history bitmap written into sample_buf with
// one position's candidates, or with the row of logits_buf the forward pass
// left them in (in place); the kept set, the drawn token or the logprobs'
// normalizer read back.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "engine/backend.h"
#include "op_args.h"

namespace qwen3::engine {

class BpfPrograms;

// The program's header for `params` over n candidates: the fields copied as
// they are (the conversion is daemon/sampling's kernel_params).
qn_sample_hdr sample_hdr(const KernelSamplingParams& params, uint32_t n);

// Runs qn_sample over the scores' candidates: the whole vocabulary when they
// carry it (PositionLogits::whole_vocab; a top-k cut is then made in the
// kernel), else the top-k list. `row`: the row of logits_buf that still
// holds the scores' whole vocabulary (the caller checked that no pass since
// overwrote it), read there in place (QN_SAMPLE_LOGITS: the same candidates
// in the same id order as full_q16); nullopt: the scores' own values are
// copied into sample_buf, the backend's exact Q16 values (full_q16,
// top_k_q16) when present; only scores without them (tests, the reference
// backend's) are rounded from float to Q16. nullopt, with a warning logged
// once per reason, when the kernel cannot take them: more than QN_SAMPLE_MAX
// candidates (a vocabulary above 2^18; Qwen3's is 151,936), float logits Q16
// cannot hold (non-finite, |logit| >= 32768: never the kernel's own), or ids
// outside the vocabulary; also (silently) for no candidates at all. Throws
// qwen3::Error(failed_precondition) for whole-vocabulary scores without a
// row and without values (their logits were overwritten),
// qwen3::Error(invalid_argument) for Q16 logits that do not match the
// floats' count or a row past QN_PMAX, and qwen3::Error when the program
// rejects its input. The caller serialises calls (one sample_buf). The
// tokens come in the kernel's (candidate) order, the order the seeded draw
// walks.
std::optional<TokenDistribution> kernel_distribution(BpfPrograms& progs, const PositionLogits& scores,
                                                     const KernelSamplingParams& params, std::span<const int32_t> history,
                                                     std::optional<uint32_t> row = std::nullopt);

// The token draw `draw_index` of a request seeded params.seed picks from that
// distribution, picked in the kernel (qn_sample with QN_SAMPLE_DRAW,
// bpf_ops/draw.h): the same token as draw_token(kernel_distribution(...))
// in user space, without copying the kept set out. nullopt and throws as
// kernel_distribution.
std::optional<int32_t> kernel_sample_token(BpfPrograms& progs, const PositionLogits& scores,
                                           const KernelSamplingParams& params, std::span<const int32_t> history,
                                           uint64_t draw_index, std::optional<uint32_t> row = std::nullopt);

// kernel_sample_token over the whole vocabulary's logits in row `row` of
// logits_buf, where the last forward pass left them (the forward pass's own
// draw): the same candidates, in the same (id) order, as over scores
// carrying that row's full_q16, so the same token, without the row's 151,936
// logits going out to user space and back. The caller holds the engine's
// lock (the row is the last pass's; the lock also serialises every use of
// sample_buf). nullopt (logged once) for a vocabulary above QN_SAMPLE_MAX;
// throws as kernel_sample_token.
std::optional<int32_t> kernel_sample_row(BpfPrograms& progs, uint32_t row, const KernelSamplingParams& params,
                                         std::span<const int32_t> history, uint64_t draw_index);

// The log-normalizer of the logprobs the API reports (Backend::
// log_normalizer_q16), by qn_sample with QN_SAMPLE_LSE: lse = max + ln(sum
// exp(l - max)) at temperature 1, in Q16, over the candidates the scores
// carry: the whole vocabulary's Q16 logits (in place in `row`, as
// kernel_distribution, else full_q16) when the scores carry the whole
// vocabulary, else the top-k list's (top_k_q16). nullopt when those
// candidates have no Q16 logits (scores that did not come from the kernel:
// the caller's float log-softmax takes them), for no candidates, or (logged
// once) for more than QN_SAMPLE_MAX or ids outside the vocabulary. Throws
// as kernel_distribution. The caller serialises calls (one sample_buf).
std::optional<int64_t> kernel_log_normalizer(BpfPrograms& progs, const PositionLogits& scores,
                                             std::optional<uint32_t> row = std::nullopt);

// Positions whose whole vocabulary went from user space into sample_buf
// (full_q16 or full copied back in) since the process started: what
// sampling in place saves, counted for the tests that keep it saved.
uint64_t whole_vocab_loads();

}  // namespace qwen3::engine
