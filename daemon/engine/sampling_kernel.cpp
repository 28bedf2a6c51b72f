#include "engine/sampling_kernel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "engine/bpf_programs.h"

namespace qwen3::engine {

qn_sample_hdr sample_hdr(const KernelSamplingParams& params, uint32_t n) {
  qn_sample_hdr h{};
  h.n = n;
  h.top_k = params.top_k;
  if (params.greedy) h.flags |= QN_SAMPLE_GREEDY;
  if (params.penalty) h.flags |= QN_SAMPLE_PENALTY;
  h.tm = params.tm;
  h.te = params.te;
  h.pm = params.pm;
  h.pe = params.pe;
  h.min_p_q44 = params.min_p_q44;
  h.top_p_q32 = params.top_p_q32;
  h.seed = params.seed;
  return h;
}

namespace {

// A float logit in Q16, for scores without the backend's own fixed-point
// values (tests, or scores built elsewhere): exact for the kernel's floats
// below |logit| 256, the float's nearest Q16 value beyond.
bool to_q16(float v, int32_t* q) {
  if (!std::isfinite(v) || std::fabs(v) >= 32768.0f) return false;
  *q = static_cast<int32_t>(std::lrint(double(v) * 65536.0));
  return true;
}

// Why the kernel declines a position; each reason is logged once per process
// and use (sampling probabilities, logprobs).
enum class Decline { too_many, not_q16, bad_id, count };

std::nullopt_t decline(Decline why, size_t n, uint32_t vocab, bool logprobs = false) {
  static std::once_flag once[2][size_t(Decline::count)];
  std::call_once(once[logprobs][size_t(why)], [&] {
    const char* what = "";
    switch (why) {
      case Decline::too_many: what = "more candidates than qn_sample takes"; break;
      case Decline::not_q16:
        what = "scores without Q16 logits and a float logit Q16 cannot hold (non-finite or |logit| >= 32768)";
        break;
      case Decline::bad_id: what = "a candidate id outside the vocabulary"; break;
      case Decline::count: break;
    }
    if (logprobs)
      spdlog::warn(
          "logprobs: {} ({} candidates, vocabulary {}, qn_sample limit {}): the log-softmax of such positions is "
          "computed in float in user space, not in BPF (logged once)",
          what, n, vocab, QN_SAMPLE_MAX);
    else
      spdlog::warn(
          "sampling: {} ({} candidates, vocabulary {}, qn_sample limit {}): the probabilities of such positions are "
          "computed by the float Sampler in user space, not in BPF (logged once)",
          what, n, vocab, QN_SAMPLE_MAX);
  });
  return std::nullopt;
}

std::atomic<uint64_t> g_whole_loads{0};

// Puts one position's candidates into sample_buf for qn_sample: the whole
// vocabulary when the scores carry it (a top-k cut, if any, is then
// qn_sample's), else the top-k list; their logits the backend's own Q16
// values when it kept them, else (sampling only) the floats in Q16. Returns
// how many, or nullopt when there are none, when the scores are not the
// kernel's (logprobs: the float log-softmax then), or when the kernel
// declines them (logged once per reason and use). Throws
// failed_precondition for whole-vocabulary scores whose values stayed in
// the kernel (logits_pass) when the caller found them overwritten.
std::optional<uint32_t> load_candidates(BpfPrograms& progs, const PositionLogits& scores, bool logprobs) {
  const uint32_t vocab = progs.layout().shape.vocab;
  const bool whole = scores.whole_vocab();
  const std::vector<int32_t>& exact = whole ? scores.full_q16 : scores.top_k_q16;
  const size_t n_float = whole ? scores.full.size() : scores.top_k.size();
  const char* use = logprobs ? "logprobs" : "sampling";
  if (whole && exact.empty() && n_float == 0)
    throw failed_precondition(std::string(use) +
                              ": this position's logits are no longer in the kernel (a later forward pass overwrote "
                              "logits_buf) and its scores carry no copy of them; sample in the pass "
                              "(Sampler::in_pass) or ask for full_logits");
  if (!exact.empty() && (whole ? n_float != 0 && exact.size() != n_float : exact.size() != n_float)) {
    if (!whole && n_float == 0) throw invalid_argument(std::string(use) + ": the scores' top-k Q16 logits come without their ids");
    throw invalid_argument(std::string(use) + ": the scores' Q16 logits (" + std::to_string(exact.size()) +
                           ") do not match their float logits (" + std::to_string(n_float) + ")");
  }
  if (exact.empty() && logprobs) return std::nullopt;  // not the kernel's scores
  const size_t n = exact.empty() ? n_float : exact.size();
  if (n == 0) return std::nullopt;  // nothing to sample from: the Sampler says so
  if (n > QN_SAMPLE_MAX) return decline(Decline::too_many, n, vocab, logprobs);
  if (n > vocab) return decline(Decline::bad_id, n, vocab, logprobs);
  auto* cand = reinterpret_cast<qn_topk_entry*>(progs.sample_buf() + qn_sample_cand_off());
  for (size_t i = 0; i < n; i++) {
    const int32_t id = whole ? static_cast<int32_t>(i) : scores.top_k[i].first;
    if (id < 0 || static_cast<uint32_t>(id) >= vocab) return decline(Decline::bad_id, n, vocab, logprobs);
    cand[i].id = id;
    if (!exact.empty()) {
      cand[i].logit = exact[i];
    } else if (!to_q16(whole ? scores.full[i] : scores.top_k[i].second, &cand[i].logit)) {
      return decline(Decline::not_q16, n, vocab, logprobs);
    }
  }
  if (whole) g_whole_loads.fetch_add(1, std::memory_order_relaxed);
  return static_cast<uint32_t>(n);
}

// The whole vocabulary in logits row `row` as qn_sample's candidates, read
// in place (QN_SAMPLE_LOGITS): the header's n, flags and row set. nullopt
// (logged once) for a vocabulary above QN_SAMPLE_MAX; throws
// invalid_argument for a row past QN_PMAX.
std::optional<qn_sample_hdr> row_candidates(BpfPrograms& progs, uint32_t row, bool logprobs) {
  const uint32_t vocab = progs.layout().shape.vocab;
  if (vocab > QN_SAMPLE_MAX) return decline(Decline::too_many, vocab, vocab, logprobs);
  if (row >= QN_PMAX)
    throw invalid_argument(std::string(logprobs ? "logprobs" : "sampling") + ": logits row " + std::to_string(row) +
                           " is past the pass's " + std::to_string(QN_PMAX));
  qn_sample_hdr h{};
  h.n = vocab;
  h.flags = QN_SAMPLE_LOGITS;
  h.row = row;
  return h;
}

// The candidates qn_sample reads for one position: the logits row `row` in
// place when the kernel still holds the scores' whole vocabulary there, else
// those load_candidates put into sample_buf (the header's n set); nullopt
// as those.
std::optional<qn_sample_hdr> candidates(BpfPrograms& progs, const PositionLogits& scores, std::optional<uint32_t> row,
                                        bool logprobs) {
  if (row && scores.whole_vocab()) return row_candidates(progs, *row, logprobs);
  const std::optional<uint32_t> n = load_candidates(progs, scores, logprobs);
  if (!n) return std::nullopt;
  qn_sample_hdr h{};
  h.n = *n;
  return h;
}

// Writes the header (params over n candidates, the draw when `draw` is set:
// flags QN_SAMPLE_DRAW, index) and the history bitmap, then runs qn_sample.
void run_program(BpfPrograms& progs, qn_sample_hdr h, std::span<const int32_t> history,
                 std::optional<uint64_t> draw) {
  const uint32_t vocab = progs.layout().shape.vocab;
  uint8_t* buf = progs.sample_buf();
  if (h.flags & QN_SAMPLE_PENALTY) {
    auto* seen = reinterpret_cast<uint32_t*>(buf + qn_sample_seen_off(vocab));
    std::memset(seen, 0, size_t(qn_sample_seen_words(vocab)) * 4);
    for (int32_t id : history)
      if (id >= 0 && static_cast<uint32_t>(id) < vocab) seen[uint32_t(id) >> 5] |= 1u << (id & 31);
  }
  if (draw) {
    h.flags |= QN_SAMPLE_DRAW;
    h.draw_index = *draw;
  }
  *progs.sample_hdr() = h;
  progs.sample();
}

// Runs qn_sample over the candidates `c` (see candidates) with the params
// (and the draw when `draw` is set); false when the kernel declined them.
bool run_sample(BpfPrograms& progs, const std::optional<qn_sample_hdr>& c, const KernelSamplingParams& params,
                std::span<const int32_t> history, std::optional<uint64_t> draw) {
  if (!c) return false;
  qn_sample_hdr h = sample_hdr(params, c->n);
  h.flags |= c->flags;
  h.row = c->row;
  run_program(progs, h, history, draw);
  return true;
}

}  // namespace

uint64_t whole_vocab_loads() { return g_whole_loads.load(std::memory_order_relaxed); }

std::optional<TokenDistribution> kernel_distribution(BpfPrograms& progs, const PositionLogits& scores,
                                                     const KernelSamplingParams& params, std::span<const int32_t> history,
                                                     std::optional<uint32_t> row) {
  if (!run_sample(progs, candidates(progs, scores, row, false), params, history, std::nullopt)) return std::nullopt;
  const uint32_t kept = progs.sample_hdr()->kept;
  const auto* out = reinterpret_cast<const qn_sample_entry*>(progs.sample_buf() +
                                                             qn_sample_out_off(progs.layout().shape.vocab));
  // In the kernel's (candidate) order: the order the seeded draw walks.
  TokenDistribution d;
  d.tokens.reserve(kept);
  for (uint32_t i = 0; i < kept; i++) d.tokens.emplace_back(out[i].id, std::ldexp(double(out[i].w), -QN_SAMPLE_PFRAC));
  return d;
}

std::optional<int32_t> kernel_sample_token(BpfPrograms& progs, const PositionLogits& scores,
                                           const KernelSamplingParams& params, std::span<const int32_t> history,
                                           uint64_t draw_index, std::optional<uint32_t> row) {
  if (!run_sample(progs, candidates(progs, scores, row, false), params, history, draw_index)) return std::nullopt;
  return progs.sample_hdr()->drawn_id;
}

std::optional<int32_t> kernel_sample_row(BpfPrograms& progs, uint32_t row, const KernelSamplingParams& params,
                                         std::span<const int32_t> history, uint64_t draw_index) {
  if (!run_sample(progs, row_candidates(progs, row, false), params, history, draw_index)) return std::nullopt;
  return progs.sample_hdr()->drawn_id;
}

std::optional<int64_t> kernel_log_normalizer(BpfPrograms& progs, const PositionLogits& scores,
                                             std::optional<uint32_t> row) {
  // The same candidates as position_logprobs (daemon/sampling) reports.
  const std::optional<qn_sample_hdr> c = candidates(progs, scores, row, true);
  if (!c) return std::nullopt;
  qn_sample_hdr h = *c;
  h.flags |= QN_SAMPLE_LSE;
  *progs.sample_hdr() = h;
  progs.sample();
  return progs.sample_hdr()->lse_q16;
}

}  // namespace qwen3::engine
