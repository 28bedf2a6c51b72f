#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_set>

#include "common/error.h"

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

}  // namespace

Sampler::Sampler(const SamplingParams& params, Backend* backend)
    : params_(params), backend_(backend), rng_(params.seed) {
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

int32_t Sampler::sample(const PositionLogits& scores, std::span<const int32_t> history) {
  return draw(distribution(scores, history));
}

TokenDistribution Sampler::distribution(const PositionLogits& scores, std::span<const int32_t> history) const {
  const bool penalty = params_.repetition_penalty != 1.0f;
  TokenDistribution dist;
  if (greedy() && !penalty && scores.argmax >= 0) {  // the backend's own argmax
    dist.tokens = {{scores.argmax, 1.0}};
    return dist;
  }
  if (backend_)
    if (auto d = backend_->sampling_distribution(scores, params_, history)) return std::move(*d);
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

  if (params_.top_k > 0 && cand.size() > static_cast<size_t>(params_.top_k)) {
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
    // Nothing is cut: every candidate in its own order (see TokenDistribution).
    dist.tokens.reserve(cand.size());
    for (const auto& c : cand) dist.tokens.emplace_back(c.first, weight(c.second) / total);
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
  return dist;
}

int32_t Sampler::draw(const TokenDistribution& dist) {
  if (dist.tokens.empty()) throw Error("sampler: an empty distribution to draw from");
  if (dist.tokens.size() == 1) return dist.tokens.front().first;
  double r = uniform();
  for (const auto& [id, p] : dist.tokens) {
    if (r < p) return id;
    r -= p;
  }
  return dist.tokens.back().first;  // rounding left r just above the sum
}

int32_t Sampler::draw_excluding(const TokenDistribution& dist, int32_t excluded) {
  const double p = dist.prob_of(excluded);
  double r = uniform() * (1.0 - p);
  int32_t last = -1;
  for (const auto& [id, q] : dist.tokens) {
    if (id == excluded) continue;
    if (r < q) return id;
    r -= q;
    last = id;
  }
  if (last < 0) throw Error("sampler: nothing to draw once the rejected draft token is excluded");
  return last;  // rounding left r just above the sum
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

std::vector<std::pair<int32_t, float>> Sampler::top_logprobs(const PositionLogits& scores, int n) {
  auto cand = candidates_of(scores);
  if (cand.empty() || n <= 0) return {};
  const size_t m = std::min(cand.size(), static_cast<size_t>(n));
  std::partial_sort(cand.begin(), cand.begin() + m, cand.end(), better);
  // log-sum-exp over every candidate the scores carry.
  const double best = cand.front().second;
  if (!std::isfinite(best)) {
    // +inf: the infinite ones share the mass; all -inf: uniform (nothing is known).
    const auto is_best = [&](const auto& c) { return double(c.second) == best; };
    const double n_best = std::isinf(best) && best > 0 ? double(std::count_if(cand.begin(), cand.end(), is_best))
                                                       : double(cand.size());
    cand.resize(m);
    for (auto& c : cand)
      c.second = best > 0 ? (double(c.second) == best ? static_cast<float>(-std::log(n_best))
                                                      : -std::numeric_limits<float>::infinity())
                          : static_cast<float>(-std::log(n_best));
    return cand;
  }
  double total = 0;
  for (const auto& c : cand) total += std::exp(double(c.second) - best);
  const double lse = best + std::log(total);
  cand.resize(m);
  for (auto& c : cand) c.second = static_cast<float>(double(c.second) - lse);
  return cand;
}

}  // namespace qwen3
