// What the qn_sample tests share (sample_test.cpp: the program against its
// model; sample_float_test.cpp: against the float Sampler; sample_lse_test.cpp:
// the log-normalizer): random and edge cases, the kernel == model check, and
// the derived bound on one fixed-point weight.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "draw.h"
#include "engine/bpf_programs.h"
#include "engine/model_plan.h"
#include "engine/sampling_kernel.h"
#include "sampling/kernel_params.h"
#include "fixed_sample.h"
#include "sample_programs.h"
#include "sampling/sampler.h"

namespace qwen3::engine::samplecases {

struct Case {
  std::vector<qn_topk_entry> cand;
  std::vector<int32_t> history;
  SamplingParams params;
};

inline std::string describe(const Case& c) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "n %zu T %g top_k %d top_p %g min_p %g penalty %g history %zu", c.cand.size(),
                c.params.temperature, c.params.top_k, c.params.top_p, c.params.min_p, c.params.repetition_penalty,
                c.history.size());
  return buf;
}

// The kept set and, with QN_SAMPLE_DRAW, the token drawn: the program's ==
// the model's kept set, and its draw == draw_token (the Sampler's, in user
// space) over the model's probabilities, for a seed and draw index that vary
// from call to call over all 64 bits.
inline void expect_kernel_equals_model(const Case& c, uint32_t vocab) {
  static uint64_t call = 0;
  ++call;
  BpfPrograms& progs = programs(vocab);
  qn_sample_hdr h = sample_hdr(kernel_params(c.params), uint32_t(c.cand.size()));
  h.flags |= QN_SAMPLE_DRAW;
  h.seed = call * 0x9E3779B97F4A7C15ull;
  h.draw_index = call % 3 == 0 ? call : call << 37 | call;
  const auto seen = bitmap(vocab, c.history);
  const fixed::SampleOut k = run_kernel(progs, h, c.cand, seen);
  const qn_sample_hdr out = *progs.sample_hdr();
  const fixed::SampleOut m = fixed::sample_model(h, c.cand, seen);
  ASSERT_FALSE(m.kept.empty()) << describe(c);
  ASSERT_EQ(out.draw_bits, qn_draw_bits(h.seed, h.draw_index)) << describe(c);
  TokenDistribution md;  // the model's kept set in its (candidate) order
  for (const auto& e : m.kept) md.tokens.emplace_back(e.id, std::ldexp(double(e.w), -QN_SAMPLE_PFRAC));
  ASSERT_EQ(out.drawn_id, draw_token(md, h.seed, h.draw_index)) << describe(c);
  ASSERT_EQ(k.kept.size(), m.kept.size()) << describe(c);
  for (size_t i = 0; i < m.kept.size(); i++) {
    ASSERT_EQ(k.kept[i].id, m.kept[i].id) << describe(c) << " entry " << i;
    ASSERT_EQ(k.kept[i].logit, m.kept[i].logit) << describe(c) << " entry " << i;
    ASSERT_EQ(k.kept[i].w, m.kept[i].w) << describe(c) << " entry " << i;
  }
  uint64_t sum = 0;
  for (const auto& e : m.kept) sum += e.w;
  // floor per entry and a divisor truncated to 32 bits: within kept + 2^9 units of 2^40 below, 2^10 above
  EXPECT_LE(sum, (uint64_t(1) << 40) + (uint64_t(1) << 10)) << describe(c);
  EXPECT_GE(sum + m.kept.size() + (uint64_t(1) << 10), uint64_t(1) << 40) << describe(c);
}

inline std::vector<qn_topk_entry> random_logits(std::mt19937_64& rng, uint32_t n, double sigma, bool sorted_topk,
                                         uint32_t vocab) {
  std::normal_distribution<double> g(0.0, sigma);
  std::vector<qn_topk_entry> c(n);
  std::vector<int32_t> ids(vocab);
  for (uint32_t i = 0; i < vocab; i++) ids[i] = int32_t(i);
  if (n < vocab) std::shuffle(ids.begin(), ids.end(), rng);
  for (uint32_t i = 0; i < n; i++) {
    // few distinct values now and then, to force ties
    double v = rng() % 4 == 0 ? std::round(g(rng)) : g(rng);
    c[i] = {n < vocab ? ids[i] : int32_t(i), int32_t(std::lround(std::clamp(v, -255.0, 255.0) * 65536.0))};
  }
  if (sorted_topk)  // the kernel's top-k list: logit descending, id ascending among equals
    std::sort(c.begin(), c.end(), [](const qn_topk_entry& a, const qn_topk_entry& b) {
      return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
    });
  return c;
}

inline SamplingParams random_params(std::mt19937_64& rng) {
  const float temps[] = {1e-3f, 0.05f, 0.6f, 1.0f, 1.7f, 30.0f, 1e5f};
  const int topks[] = {0, 0, 1, 5, 20, 64, 200};
  const float topps[] = {1.0f, 1.0f, 0.95f, 0.5f, 0.8f, 1e-6f};
  const float minps[] = {0.0f, 0.0f, 0.05f, 0.3f, 0.9999f};
  const float pens[] = {1.0f, 1.0f, 1.3f, 0.7f, 2.0f, 1.05f};
  SamplingParams p;
  p.temperature = temps[rng() % 7];
  p.top_k = topks[rng() % 7];
  p.top_p = topps[rng() % 6];
  p.min_p = minps[rng() % 5];
  p.repetition_penalty = pens[rng() % 6];
  return p;
}

inline std::vector<int32_t> random_history(std::mt19937_64& rng, const std::vector<qn_topk_entry>& cand) {
  std::vector<int32_t> h;
  const size_t len = rng() % 40;
  for (size_t i = 0; i < len; i++) h.push_back(cand[rng() % cand.size()].id);
  return h;
}

// The bound on the relative error of one fixed-point weight against
// exp((l - M) / T) in double (docs/numerics.md): the two table entries
// rounded to Q30 (values >= 2^29 and >= 2^29.99: 2^-30, 2^-31), their product
// and the linear step rounded (2^-30 each), the linear step's own error
// (2^-33), the temperature factor's 32-bit mantissa over up to 46 octaves,
// t floored to 2^-32 octaves.
inline const double kWeightRel = 3 * std::ldexp(1, -30) + std::ldexp(1, -31) + std::ldexp(1, -33) +
                          46 * std::log(2.0) * std::ldexp(1, -31) + std::log(2.0) * std::ldexp(1, -32);

}  // namespace qwen3::engine::samplecases
