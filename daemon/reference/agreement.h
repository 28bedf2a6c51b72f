// Teacher-forced agreement of a backend with the float reference, the metric
// of docs/numerics.md: argmax agreement at every position of every prompt,
// with near-ties (the reference's top-2 margin under kNearTieMargin) counted
// apart, mean KL(ref || other), the logit error, and the perplexity of the
// fed text under both. Shared by the accuracy tests (tests/engine) and
// qwen3-bpf-quant-study, so the two report one metric.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/backend.h"

namespace qwen3::reference {

constexpr float kNearTieMargin = 0.05f;

struct Agreement {
  int positions = 0, agree = 0, near_ties = 0, near_tie_agree = 0;
  double kl_sum = 0;
  double err_sum = 0, err_max = 0, spread_sum = 0;  // |logit difference|, top-1 minus mean logit
  double ref_nll = 0, other_nll = 0;  // next-token negative log-likelihood (nats) of the fed text
  int nll_n = 0;
  int decided() const { return positions - near_ties; }
  double rate() const { return decided() ? double(agree) / decided() : 0.0; }
  double ref_ppl() const { return std::exp(ref_nll / std::max(1, nll_n)); }
  double other_ppl() const { return std::exp(other_nll / std::max(1, nll_n)); }
};

inline std::vector<double> log_softmax(const std::vector<float>& logits) {
  double mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float v : logits) sum += std::exp(v - mx);
  double lse = mx + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); i++) out[i] = logits[i] - lse;
  return out;
}

// Adds one prompt's positions: r from the reference, b from the backend under
// test, both fed `ids` with all positions and full logits.
inline void accumulate(Agreement& a, const std::vector<int32_t>& ids, const ForwardResult& r, const ForwardResult& b) {
  for (size_t p = 0; p < r.positions.size(); p++) {
    const auto& rf = r.positions[p].full;
    std::vector<float> sorted = rf;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    const bool near_tie = sorted[0] - sorted[1] < kNearTieMargin;
    const bool same = r.positions[p].argmax == b.positions[p].argmax;
    a.positions++;
    if (near_tie) {
      a.near_ties++;
      a.near_tie_agree += same;
    } else {
      a.agree += same;
    }
    auto lr = log_softmax(rf), lb = log_softmax(b.positions[p].full);
    if (p + 1 < ids.size()) {
      a.ref_nll -= lr[ids[p + 1]];
      a.other_nll -= lb[ids[p + 1]];
      a.nll_n++;
    }
    double kl = 0;
    for (size_t t = 0; t < lr.size(); t++) kl += std::exp(lr[t]) * (lr[t] - lb[t]);
    a.kl_sum += kl;
    double mean = 0;
    for (size_t t = 0; t < rf.size(); t++) {
      double d = std::fabs(double(rf[t]) - b.positions[p].full[t]);
      a.err_sum += d / rf.size();
      a.err_max = std::max(a.err_max, d);
      mean += rf[t];
    }
    a.spread_sum += sorted[0] - mean / rf.size();
  }
}

}  // namespace qwen3::reference
