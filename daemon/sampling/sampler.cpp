#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "draw.h"

namespace qwen3 {

namespace {

// Candidates for sampling when the scores carry no full logits: the backend's
// top-k list. With full logits every token is a candidate.
// NaN logits (a broken backend) become -inf so that every comparison below is
// a strict weak order and no probability is NaN.
std::vector<std::pair<int32_t, float>> candidates_of(const PositionLogits& scores) {
  std::vector<std::pair<int32_t, float>> all;
  if (!scores.full.empty()) {
    all.resize(scores.full.size());
    for (size_t i = 0; i < scores.full.size(); ++i) all[i] = {static_cast<int32_t>(i), scores.full[i]};
  } else {
    all = scores.top_k;
  }
  for (auto& c : all)
    if (std::isnan(c.second)) c.second = -std::numeric_limits<float>::infinity();
  return all;
}

// Best first; among equal logits the lower id first, the order the kernel's
// top-k list already has.
bool better(const std::pair<int32_t, float>& a, const std::pair<int32_t, float>& b) {
  return a.second != b.second ? a.second > b.second : a.first < b.first;
}

// Sorts candidates only as far as they are read: with full logits there are
// ~150k of them, and a sampler walks a few dozen from the top.
class SortedPrefix {
 public:
  explicit SortedPrefix(std::vector<std::pair<int32_t, float>>& c) : c_(c) {}
  const std::pair<int32_t, float>& operator[](size_t i) {
    if (i >= sorted_) {
      const size_t m = std::min(c_.size(), std::max({i + 1, sorted_ * 4, size_t{64}}));
      std::partial_sort(c_.begin() + sorted_, c_.begin() + m, c_.end(), better);
      sorted_ = m;
    }
    return c_[i];
  }

 private:
  std::vector<std::pair<int32_t, float>>& c_;
  size_t sorted_ = 0;
};

// Puts kept tokens back in candidate order (ids for full logits, the list's
// order otherwise), the order the draw walks and the kernel keeps them in.
void in_candidate_order(std::vector<std::pair<int32_t, double>>& kept, const PositionLogits& scores) {
  if (!scores.full.empty()) {
    std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    return;
  }
  std::unordered_map<int32_t, size_t> rank;
  for (size_t i = 0; i < scores.top_k.size(); ++i) rank.emplace(scores.top_k[i].first, i);
  std::sort(kept.begin(), kept.end(), [&](const auto& a, const auto& b) { return rank[a.first] < rank[b.first]; });
}

}  // namespace

int32_t draw_token(const TokenDistribution& dist, uint64_t seed, uint64_t index) {
  if (dist.tokens.empty()) throw Error("sampler: an empty distribution to draw from");
  if (dist.tokens.size() == 1) return dist.tokens.front().first;
  // Q40, as qn_sample's probabilities are (exactly so for the kernel's own).
  std::vector<uint64_t> w(dist.tokens.size());
  uint64_t total = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double p = std::clamp(dist.tokens[i].second, 0.0, 1.0);  // NaN-free: the Sampler's never are
    total += w[i] = static_cast<uint64_t>(std::llround(std::ldexp(p, QN_SAMPLE_PFRAC)));
  }
  if (total == 0) return dist.tokens.front().first;  // every probability below 2^-41: nothing to weigh
  const uint64_t r = qn_draw_point(qn_draw_bits(seed, index), total);
  uint64_t acc = 0;
  for (size_t i = 0; i < w.size(); ++i)
    if (r < (acc += w[i])) return dist.tokens[i].first;
  return dist.tokens.back().first;  // unreachable: r < total
}

Sampler::Sampler(const SamplingParams& params, SamplingCalls* engine) : params_(params), engine_(engine) {
  auto bad = [](const std::string& what) { return invalid_argument("sampling: " + what); };
  if (!std::isfinite(params.temperature) || params.temperature < 0.0f)
    throw bad("temperature must be >= 0 (got " + std::to_string(params.temperature) + ")");
  if (params.top_k < 0) throw bad("top_k must be >= 0 (got " + std::to_string(params.top_k) + ")");
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f))
    throw bad("top_p must be in (0, 1] (got " + std::to_string(params.top_p) + ")");
  if (!(params.min_p >= 0.0f && params.min_p < 1.0f))
    throw bad("min_p must be in [0, 1) (got " + std::to_string(params.min_p) + ")");
  if (!(params.repetition_penalty > 0.0f && std::isfinite(params.repetition_penalty)))
    throw bad("repetition_penalty must be > 0 (got " + std::to_string(params.repetition_penalty) + ")");
  fixed_ = kernel_params(params);
}

ForwardWants Sampler::wants() const {
  ForwardWants w;
  const bool penalty = params_.repetition_penalty != 1.0f;
  if (greedy() && !penalty) {
    w.top_k = 1;  // argmax is all we need
  } else if (params_.top_k > 0 && !penalty) {
    // The backend's top-k is exactly the candidate set. A backend whose kernel
    // selects fewer (BPF: 64) adds the whole vocabulary's fixed-point logits
    // (PositionLogits::full_q16) and makes the cut in the kernel.
    w.top_k = params_.top_k;
  } else {
    w.full_logits = true;  // nucleus over the whole vocabulary, or penalised logits
  }
  return w;
}

ForwardWants Sampler::in_pass(const ForwardWants& base, std::span<const int32_t> history) const {
  const bool penalty = params_.repetition_penalty != 1.0f;
  if (!engine_ || !engine_->samples_in_pass() || (greedy() && !penalty)) return base;
  const ForwardWants mine = wants();
  ForwardWants w = base;
  w.sample = PassSampling{fixed_, history, next_draw_,
                          base.full_logits == mine.full_logits && base.top_k == mine.top_k};
  return w;
}

int32_t Sampler::sample(const PositionLogits& scores, std::span<const int32_t> history) {
  const int32_t id = peek_sample(scores, history, 0);
  ++next_draw_;
  return id;
}

int32_t Sampler::peek_sample(const PositionLogits& scores, std::span<const int32_t> history, uint64_t ahead) const {
  const uint64_t index = next_draw_ + ahead;
  if (scores.sampled >= 0 && scores.sampled_draw == index) return scores.sampled;  // drawn in the pass
  const bool penalty = params_.repetition_penalty != 1.0f;
  if (!(greedy() && !penalty && scores.argmax >= 0) && engine_)
    if (auto id = engine_->sample_token(scores, fixed_, history, index)) return *id;
  return draw_token(distribution(scores, history), params_.seed, index);
}

TokenDistribution Sampler::distribution(const PositionLogits& scores, std::span<const int32_t> history) const {
  const bool penalty = params_.repetition_penalty != 1.0f;
  TokenDistribution dist;
  if (greedy() && !penalty && scores.argmax >= 0) {  // the backend's own argmax
    dist.tokens = {{scores.argmax, 1.0}};
    return dist;
  }
  if (engine_)
    if (auto d = engine_->sampling_distribution(scores, fixed_, history)) return std::move(*d);
  auto cand = candidates_of(scores);
  if (cand.empty()) throw Error("sampler: the backend reported no scores for this position");

  if (penalty) {
    // CTRL-style penalty, as transformers applies it: divide positive logits,
    // multiply negative ones, once per distinct token seen.
    std::unordered_set<int32_t> seen(history.begin(), history.end());
    for (auto& [id, logit] : cand)
      if (seen.count(id)) logit = logit > 0 ? logit / params_.repetition_penalty : logit * params_.repetition_penalty;
  }
  const std::pair<int32_t, float> top = *std::min_element(cand.begin(), cand.end(), better);
  // Greedy, or nothing finite to weigh: an +inf logit wins, all -inf is a tie (lowest id).
  if (greedy() || !std::isfinite(top.second)) {
    dist.tokens = {{top.first, 1.0}};
    return dist;
  }

  const bool k_cut = params_.top_k > 0 && cand.size() > static_cast<size_t>(params_.top_k);
  if (k_cut) {
    std::partial_sort(cand.begin(), cand.begin() + params_.top_k, cand.end(), better);
    cand.resize(params_.top_k);
  }

  // Softmax at temperature, relative to the best candidate for stability, in
  // double: the best (finite) candidate weighs exactly 1, so total >= 1, every
  // other weight is in [0, 1] (-inf gives 0), and nothing is NaN.
  const double inv_t = 1.0 / double(params_.temperature);
  const double best = top.second;  // the top-k cut keeps the best
  auto weight = [&](float logit) { return std::exp((double(logit) - best) * inv_t); };
  double total = 0;
  for (const auto& c : cand) total += weight(c.second);

  if (params_.min_p <= 0.0f && params_.top_p >= 1.0f) {
    // No cut but top-k: every candidate in its own order (see TokenDistribution).
    dist.tokens.reserve(cand.size());
    for (const auto& c : cand) dist.tokens.emplace_back(c.first, weight(c.second) / total);
    if (k_cut) in_candidate_order(dist.tokens, scores);
    return dist;
  }
  SortedPrefix sorted(cand);
  auto prob = [&](size_t i) { return weight(sorted[i].second) / total; };
  size_t keep = cand.size();
  if (params_.min_p > 0.0f) {
    const double floor = params_.min_p * prob(0);
    keep = 1;
    while (keep < cand.size() && prob(keep) >= floor) ++keep;
  }
  if (params_.top_p < 1.0f) {
    double acc = 0;
    size_t n = 0;
    while (n < keep) {
      acc += prob(n++);
      if (acc >= params_.top_p) break;
    }
    keep = std::max<size_t>(n, 1);
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += prob(i);
  dist.tokens.reserve(keep);
  for (size_t i = 0; i < keep; ++i) dist.tokens.emplace_back(sorted[i].first, prob(i) / kept);
  in_candidate_order(dist.tokens, scores);
  return dist;
}

int32_t Sampler::draw(const TokenDistribution& dist) { return draw_token(dist, params_.seed, next_draw_++); }

std::vector<std::pair<int32_t, float>> Sampler::top_logprobs(const PositionLogits& scores, int n,
                                                             SamplingCalls* engine) {
  std::vector<std::pair<int32_t, float>> out;
  for (const TokenLogprob& t : position_logprobs(scores, n, engine).top) out.emplace_back(t.id, t.logprob);
  return out;
}

PositionLogprobs position_logprobs(const PositionLogits& scores, int n, SamplingCalls* engine, int32_t chosen) {
  PositionLogprobs out;
  const size_t want = n > 0 ? static_cast<size_t>(n) : 0;
  if (want == 0 && chosen < 0) return out;
  const bool whole = scores.whole_vocab();
  const size_t count = whole ? std::max(scores.full.size(), scores.full_q16.size()) : scores.top_k.size();
  // The list is the order of the whole vocabulary's values: they must be here.
  if (whole && count == 0)
    throw failed_precondition(
        "logprobs: the scores carry the whole vocabulary only in the backend (a top-k beyond what its kernel "
        "selects, without full logits); ask for full_logits with logprobs");
  if (count == 0) return out;
  const auto id_of = [&](size_t i) { return whole ? static_cast<int32_t>(i) : scores.top_k[i].first; };
  // The candidate index of `chosen`, or count.
  const auto index_of = [&](int32_t id) -> size_t {
    if (id < 0) return count;
    if (whole) return static_cast<size_t>(id) < count ? static_cast<size_t>(id) : count;
    for (size_t i = 0; i < count; ++i)
      if (scores.top_k[i].first == id) return i;
    return count;
  };
  const size_t m = std::min(count, want);
  std::vector<size_t> order(count);
  for (size_t i = 0; i < count; ++i) order[i] = i;

  // The kernel's normalizer: logprobs are differences of the kernel's integers.
  const std::vector<int32_t>& q16 = whole ? scores.full_q16 : scores.top_k_q16;
  const std::optional<int64_t> lse = engine && q16.size() == count ? engine->log_normalizer_q16(scores) : std::nullopt;
  if (lse) {
    const auto logit_of = [&](size_t i) {
      return whole ? (scores.full.size() == count ? scores.full[i] : float(q16[i]) / 65536.0f) : scores.top_k[i].second;
    };
    const auto logprob = [&](size_t i) { return static_cast<float>(double(int64_t(q16[i]) - *lse) / 65536.0); };
    std::partial_sort(order.begin(), order.begin() + m, order.end(), [&](size_t a, size_t b) {
      return q16[a] != q16[b] ? q16[a] > q16[b] : id_of(a) < id_of(b);
    });
    for (size_t r = 0; r < m; ++r) out.top.push_back({id_of(order[r]), logit_of(order[r]), logprob(order[r])});
    if (const size_t c = index_of(chosen); c < count) out.chosen = logprob(c);
    out.kernel = true;
    return out;
  }

  // Float (the reference backend): log-sum-exp in double over every candidate.
  std::vector<float> l(count);
  for (size_t i = 0; i < count; ++i) {
    const float v = whole ? (scores.full.size() == count ? scores.full[i] : float(scores.full_q16[i]) / 65536.0f)
                          : scores.top_k[i].second;
    l[i] = std::isnan(v) ? -std::numeric_limits<float>::infinity() : v;  // NaN (a broken backend) counts as -inf
  }
  const double best = *std::max_element(l.begin(), l.end());
  double lse_f = 0, n_best = 0;
  if (std::isfinite(best)) {
    double total = 0;
    for (float v : l) total += std::exp(double(v) - best);
    lse_f = best + std::log(total);
  } else {
    // +inf: the infinite ones share the mass; all -inf: uniform (nothing is known).
    n_best = best > 0 ? double(std::count(l.begin(), l.end(), float(best))) : double(count);
  }
  const auto logprob = [&](size_t i) -> float {
    if (std::isfinite(best)) return static_cast<float>(double(l[i]) - lse_f);
    if (best > 0 && double(l[i]) != best) return -std::numeric_limits<float>::infinity();
    return static_cast<float>(-std::log(n_best));
  };
  std::partial_sort(order.begin(), order.begin() + m, order.end(), [&](size_t a, size_t b) {
    return l[a] != l[b] ? l[a] > l[b] : id_of(a) < id_of(b);
  });
  for (size_t r = 0; r < m; ++r) out.top.push_back({id_of(order[r]), l[order[r]], logprob(order[r])});
  if (const size_t c = index_of(chosen); c < count) out.chosen = logprob(c);
  return out;
}

}  // namespace qwen3
