// The bit-exact C++ model of qn_sample (bpf_ops/ops_sample.h): the same
// numerics.h formulas, but every cut computed from its definition by sorting
// (the program uses a radix select), so agreement tests the select as well:
//   order:  qn_sample_key ascending (logit descending), candidate order among equals
//   top-k:  the first k of that order (k > 0 and k < n)
//   min-p:  weight >= min_p * 2^44; weights of 0 dropped
//   top-p:  in that order, kept while the weight before it (top-k and min-p
//           set) is below ceil(top_p * W), W the top-k set's total weight.
// And lse_model, the program's log-normalizer mode (QN_SAMPLE_LSE).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "op_args.h"

namespace qwen3::fixed {

struct SampleOut {
  std::vector<qn_sample_entry> kept;  // candidate order, w = Q40 probability
  bool operator==(const SampleOut& o) const {
    if (kept.size() != o.kept.size()) return false;
    for (size_t i = 0; i < kept.size(); i++)
      if (kept[i].id != o.kept[i].id || kept[i].logit != o.kept[i].logit || kept[i].w != o.kept[i].w) return false;
    return true;
  }
};

// cand: (id, Q16 logit); seen: the bitmap (bit id) the program reads.
inline SampleOut sample_model(const qn_sample_hdr& p, std::vector<qn_topk_entry> cand,
                              const std::vector<uint32_t>& seen) {
  SampleOut out;
  const size_t n = cand.size();
  if (n == 0) return out;
  if (p.flags & QN_SAMPLE_PENALTY)
    for (auto& c : cand)
      if (seen[uint32_t(c.id) >> 5] >> (c.id & 31) & 1) c.logit = qn_rep_penalty(c.logit, p.pm, p.pe);
  size_t best = 0;
  for (size_t i = 1; i < n; i++)
    if (cand[i].logit > cand[best].logit) best = i;
  const int32_t M = cand[best].logit;
  if (p.flags & QN_SAMPLE_GREEDY) {
    out.kept.push_back({cand[best].id, M, uint64_t(1) << QN_SAMPLE_PFRAC});
    return out;
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return qn_sample_key(cand[a].logit) < qn_sample_key(cand[b].logit);
  });
  std::vector<char> in(n, 1);
  if (p.top_k > 0 && p.top_k < n)
    for (size_t r = p.top_k; r < n; r++) in[order[r]] = 0;
  int csh = 0;
  const uint64_t cm = qn_temp_factor(p.tm, p.te, &csh);
  std::vector<uint64_t> w(n, 0);
  uint64_t W = 0;
  for (size_t i = 0; i < n; i++) {
    if (!in[i]) continue;
    w[i] = qn_exp2_neg_q44(qn_sample_octaves(uint64_t(int64_t(M) - cand[i].logit), cm, csh));
    W += w[i];
    if (w[i] == 0 || w[i] < p.min_p_q44) in[i] = 0;
  }
  if (p.top_p_q32 < (uint64_t(1) << 32)) {
    const uint64_t target = qn_top_p_target(W, p.top_p_q32);
    uint64_t before = 0;
    for (size_t i : order) {
      if (!in[i]) continue;
      if (before >= target) in[i] = 0;
      before += w[i];
    }
  }
  uint64_t Wk = 0;
  for (size_t i = 0; i < n; i++)
    if (in[i]) Wk += w[i];
  const int s = qn_prob_shift(Wk);
  const uint64_t d = qn_prob_recip(Wk >> s);
  for (size_t i = 0; i < n; i++)
    if (in[i]) out.kept.push_back({cand[i].id, cand[i].logit, qn_sample_prob_q40(w[i], d, s)});
  return out;
}

// qn_sample with QN_SAMPLE_LSE: the log-normalizer (Q16) of the candidates'
// logits as given, at temperature 1: M the best, S the sum of the weights
// 2^-t (Q44, 0 from 46 octaves on), lse = M + ln(S / 2^44) (qn_lse_q16).
struct LseSum {
  int32_t M;   // the best logit
  uint64_t S;  // the weights' sum (Q44)
};
inline LseSum lse_sum_model(const std::vector<qn_topk_entry>& cand) {
  int32_t M = cand.at(0).logit;
  for (const auto& c : cand) M = std::max(M, c.logit);
  int csh = 0;
  const uint64_t cm = qn_lse_factor(&csh);
  uint64_t S = 0;
  for (const auto& c : cand) S += qn_exp2_neg_q44(qn_sample_octaves(uint64_t(int64_t(M) - c.logit), cm, csh));
  return {M, S};
}
inline int64_t lse_model(const std::vector<qn_topk_entry>& cand) {
  const LseSum s = lse_sum_model(cand);
  return qn_lse_q16(s.M, s.S);
}

}  // namespace qwen3::fixed
