// qn_sample (bpf_ops/ops_sample.h), the sampling probabilities in the kernel:
//   - == its C++ model (tests/bpf/fixed_sample.h) bit for bit, on random and
//     edge inputs: all logits equal, one huge gap, penalty > 1 and < 1,
//     temperature at the 1e-3 floor and large, top_p tiny and 1, min_p near 1,
//     candidate lists of the whole vocabulary (151,936);
//   - against the float Sampler: the same kept set and a total-variation
//     distance within the bound derived from the fixed-point precision
//     (docs/numerics.md), wherever the float's own cut decisions are not
//     within that precision of their thresholds;
//   - uses the backend's exact Q16 logits where float cannot tell them apart
//     (above 256) or hold them (near 32768);
//   - rejects parameters outside its fixed-point ranges;
//   - its log-normalizer mode (QN_SAMPLE_LSE, the reported logprobs): == the
//     model (fixed::lse_model) bit for bit on random and edge inputs (one
//     candidate, all equal, a spread where the weights underflow, 151,936
//     candidates), within the derived bound of the exact log-sum-exp, and
//     position_logprobs built on it within that bound of the float log-softmax.
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
#include "fixed_sample.h"
#include "sample_programs.h"
#include "sampling/sampler.h"

namespace qwen3::engine {
namespace {

struct Case {
  std::vector<qn_topk_entry> cand;
  std::vector<int32_t> history;
  SamplingParams params;
};

std::string describe(const Case& c) {
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
void expect_kernel_equals_model(const Case& c, uint32_t vocab) {
  static uint64_t call = 0;
  ++call;
  BpfPrograms& progs = programs(vocab);
  qn_sample_hdr h = sample_params_fixed(c.params, uint32_t(c.cand.size()));
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

std::vector<qn_topk_entry> random_logits(std::mt19937_64& rng, uint32_t n, double sigma, bool sorted_topk,
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

SamplingParams random_params(std::mt19937_64& rng) {
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

std::vector<int32_t> random_history(std::mt19937_64& rng, const std::vector<qn_topk_entry>& cand) {
  std::vector<int32_t> h;
  const size_t len = rng() % 40;
  for (size_t i = 0; i < len; i++) h.push_back(cand[rng() % cand.size()].id);
  return h;
}

TEST(SampleProgram, EqualsModelOnRandomInputs) {
  const uint32_t vocab = 5000;
  std::mt19937_64 rng(11);
  for (int iter = 0; iter < 600; iter++) {
    const uint32_t sizes[] = {1, 2, 20, 64, 300, vocab};
    const uint32_t n = sizes[rng() % 6];
    const double sigmas[] = {0.01, 0.5, 2.0, 8.0};
    Case c;
    c.cand = random_logits(rng, n, sigmas[rng() % 4], rng() % 2, vocab);
    c.params = random_params(rng);
    if (iter % 5 == 0) c.params.temperature = 0.0f;  // greedy (with or without penalty)
    c.history = random_history(rng, c.cand);
    expect_kernel_equals_model(c, vocab);
    if (HasFatalFailure()) return;
  }
}

TEST(SampleProgram, EqualsModelOnEdgeInputs) {
  const uint32_t vocab = 5000;
  std::mt19937_64 rng(5);
  std::vector<Case> cases;
  auto flat = [&](uint32_t n, int32_t v) {
    std::vector<qn_topk_entry> c(n);
    for (uint32_t i = 0; i < n; i++) c[i] = {int32_t(i), v};
    return c;
  };
  for (float tp : {1e-6f, 0.5f, 1.0f})  // all equal: the ties split by candidate order
    for (int k : {0, 1, 7, 4999})
      cases.push_back({flat(vocab, 3 << 16), {}, {.temperature = 1.0f, .top_k = k, .top_p = tp}});
  {
    auto c = flat(vocab, -(200 << 16));  // one huge gap: the rest weigh exactly 0
    c[1234].logit = 200 << 16;
    cases.push_back({c, {}, {.temperature = 1.0f}});
    cases.push_back({c, {}, {.temperature = 30000.0f, .top_p = 0.3f}});
    cases.push_back({c, {1234}, {.temperature = 1.0f, .repetition_penalty = 1e6f}});  // penalty clamped to 2^24
  }
  {
    auto c = flat(vocab, 0);  // saturated extremes
    c[0].logit = INT32_MAX;
    c[1].logit = -INT32_MAX;
    c[2].logit = INT32_MAX;
    cases.push_back({c, {0, 1}, {.temperature = 1e-3f, .repetition_penalty = 0.001f}});
    cases.push_back({c, {}, {.temperature = 1e9f, .min_p = 0.9999f}});
  }
  for (float T : {1e-3f, 1e-3f * 1.0001f, 0.6f, 1e4f, 1e12f})
    for (float pen : {1.0f, 1.5f, 0.5f})
      for (float mp : {0.0f, 0.9999f}) {
        Case c;
        c.cand = random_logits(rng, 64, 0.02, true, vocab);
        c.history = random_history(rng, c.cand);
        c.params = {.temperature = T, .top_k = 20, .top_p = 0.95f, .min_p = mp, .repetition_penalty = pen};
        cases.push_back(c);
      }
  for (const Case& c : cases) {
    expect_kernel_equals_model(c, vocab);
    if (HasFatalFailure()) return;
  }
}

TEST(SampleProgram, EqualsModelOverTheQwenVocabulary) {
  std::mt19937_64 rng(3);
  for (int iter = 0; iter < 12; iter++) {
    Case c;
    c.cand = random_logits(rng, kQwenVocab, iter % 2 ? 3.0 : 0.3, false, kQwenVocab);
    c.params = random_params(rng);
    if (iter < 4) c.params.top_k = iter == 0 ? 0 : 20 * iter;
    c.history = random_history(rng, c.cand);
    expect_kernel_equals_model(c, kQwenVocab);
    if (HasFatalFailure()) return;
  }
}

TEST(SampleProgram, RejectsParametersOutsideItsRanges) {
  BpfPrograms& progs = programs(1000);
  std::vector<qn_topk_entry> cand = {{1, 0}, {2, 1 << 16}};
  const auto seen = bitmap(1000, {});
  const qn_sample_hdr good = sample_params_fixed({.temperature = 1.0f}, 2);
  EXPECT_NO_THROW(run_kernel(progs, good, cand, seen));
  auto bad = [&](auto edit) {
    qn_sample_hdr h = good;
    edit(h);
    EXPECT_THROW(run_kernel(progs, h, cand, seen), Error);
  };
  bad([](qn_sample_hdr& h) { h.n = 0; });
  bad([](qn_sample_hdr& h) { h.n = 1001; });
  bad([](qn_sample_hdr& h) { h.tm = 5; });
  bad([](qn_sample_hdr& h) { h.te = 60; });
  bad([](qn_sample_hdr& h) { h.top_p_q32 = 0; });
  bad([](qn_sample_hdr& h) { h.min_p_q44 = uint64_t(1) << 44; });
  bad([](qn_sample_hdr& h) { h.flags |= QN_SAMPLE_PENALTY, h.pm = 3, h.pe = 1; });
  cand[1].id = 1000;  // outside the vocabulary
  EXPECT_THROW(run_kernel(progs, good, cand, seen), Error);
}

// ---- against float ------------------------------------------------------------

// The bound on the relative error of one fixed-point weight against
// exp((l - M) / T) in double (docs/numerics.md): the two table entries
// rounded to Q30 (values >= 2^29 and >= 2^29.99: 2^-30, 2^-31), their product
// and the linear step rounded (2^-30 each), the linear step's own error
// (2^-33), the temperature factor's 32-bit mantissa over up to 46 octaves,
// t floored to 2^-32 octaves.
const double kWeightRel = 3 * std::ldexp(1, -30) + std::ldexp(1, -31) + std::ldexp(1, -33) +
                          46 * std::log(2.0) * std::ldexp(1, -31) + std::log(2.0) * std::ldexp(1, -32);

// The two parts of that bound on their own, against double: 2^-t over
// every table entry and random low bits (relative 3.4e-9, plus the Q44
// rounding), and the temperature factor over the whole temperature range.
// The kernel's Q16 logits reach qn_sample as they are (PositionLogits::
// top_k_q16 / full_q16), not through float: above |logit| 256 a float cannot
// hold every Q16 value, and near 32768 it rounds to 32768, which Q16 cannot
// hold at all (the float path used to take over there).
std::map<int32_t, double> as_map(const TokenDistribution& d) { return {d.tokens.begin(), d.tokens.end()}; }
std::map<int32_t, double> as_map(const fixed::SampleOut& o) {
  std::map<int32_t, double> m;
  for (const auto& e : o.kept) m[e.id] = std::ldexp(double(e.w), -QN_SAMPLE_PFRAC);
  return m;
}

TEST(SampleKernel, UsesTheExactQ16LogitsBeyondTheFloatsPrecision) {
  const uint32_t vocab = 1000;
  BpfPrograms& progs = programs(vocab);
  const int32_t L = 300 * 65536;  // 300.0; L + 1 is 300.0000153, the same float
  ASSERT_EQ(float(L + 1) / 65536.0f, float(L) / 65536.0f);
  // the kernel's top-k list: logit descending, id ascending among equals
  const std::vector<qn_topk_entry> list = {{7, L + 1}, {3, L}, {11, L - 2 * 65536}, {20, L - 3 * 65536}};
  PositionLogits s;
  for (const auto& c : list) {
    s.top_k.push_back({c.id, float(c.logit) / 65536.0f});  // as BpfBackend::collect reports them
    s.top_k_q16.push_back(c.logit);
  }
  PositionLogits rounded = s;  // the same floats without the exact values
  rounded.top_k_q16.clear();
  for (const SamplingParams& p : {SamplingParams{.temperature = 1.0f}, SamplingParams{.temperature = 1.0f, .top_k = 1},
                                  SamplingParams{.temperature = 0.01f, .top_p = 0.5f}}) {
    SCOPED_TRACE("top_k " + std::to_string(p.top_k) + " top_p " + std::to_string(p.top_p));
    const auto k = kernel_distribution(progs, s, p, {});
    ASSERT_TRUE(k.has_value());
    const fixed::SampleOut m = fixed::sample_model(sample_params_fixed(p, uint32_t(list.size())), list, {});
    EXPECT_EQ(as_map(*k), as_map(m));
    ASSERT_FALSE(k->tokens.empty());
    EXPECT_EQ(k->tokens.front().first, 7);  // the list's order: one Q16 unit above id 3
    if (p.top_k == 1 || p.top_p < 1.0f) {
      EXPECT_EQ(k->tokens.size(), 1u);
    } else {
      // p7 / p3 = e^(2^-16 / T): ~3.8e-6 more mass for id 7
      EXPECT_GT(k->prob_of(7) - k->prob_of(3), 3e-6);
      EXPECT_NEAR(k->prob_of(7) / k->prob_of(3), std::exp(std::ldexp(1.0, -16)), 1e-8);
    }
    // Through float the two tie: what the exact values avoid.
    const auto r = kernel_distribution(progs, rounded, p, {});
    ASSERT_TRUE(r.has_value());
    if (p.top_k == 0 && p.top_p >= 1.0f) {
      EXPECT_EQ(r->prob_of(7), r->prob_of(3));
    }
  }

  // The whole vocabulary around 300: a top-k of 1 keeps id 7, one Q16 unit
  // above id 3; through float they tie and the lower id would win.
  {
    std::vector<qn_topk_entry> all(vocab);
    PositionLogits w;
    for (uint32_t i = 0; i < vocab; i++) {
      const int32_t q = i == 7 ? L + 1 : i == 3 ? L : L - 65536 * int32_t(1 + i % 50);
      all[i] = {int32_t(i), q};
      w.full_q16.push_back(q);
      w.full.push_back(float(q) / 65536.0f);
    }
    const SamplingParams p{.temperature = 1.0f, .top_k = 1};
    const auto k = kernel_distribution(progs, w, p, {});
    ASSERT_TRUE(k.has_value());
    EXPECT_EQ(as_map(*k), as_map(fixed::sample_model(sample_params_fixed(p, vocab), all, {})));
    ASSERT_EQ(k->tokens.size(), 1u);
    EXPECT_EQ(k->tokens[0].first, 7);
    PositionLogits r = w;
    r.full_q16.clear();
    const auto kr = kernel_distribution(progs, r, p, {});
    ASSERT_TRUE(kr.has_value());
    ASSERT_EQ(kr->tokens.size(), 1u);
    EXPECT_EQ(kr->tokens[0].first, 3);
  }

  // The whole vocabulary, next to Q16's top (32767.99998 is 32768.0f as a float).
  std::vector<qn_topk_entry> all(vocab);
  PositionLogits w;
  for (uint32_t i = 0; i < vocab; i++) {
    const int32_t q = i == 500 ? INT32_MAX : i == 400 ? INT32_MAX - 1 : INT32_MAX - 65536 - int32_t(i) * 977;
    all[i] = {int32_t(i), q};
    w.full_q16.push_back(q);
    w.full.push_back(float(q) / 65536.0f);
  }
  ASSERT_EQ(w.full[500], 32768.0f);
  for (const SamplingParams& p :
       {SamplingParams{.temperature = 0.7f}, SamplingParams{.temperature = 1.0f, .top_k = 100},
        SamplingParams{.temperature = 1.0f, .min_p = 0.5f, .repetition_penalty = 1.3f}}) {
    SCOPED_TRACE("top_k " + std::to_string(p.top_k) + " penalty " + std::to_string(p.repetition_penalty));
    const std::vector<int32_t> history = {400, 9};
    const auto k = kernel_distribution(progs, w, p, history);
    ASSERT_TRUE(k.has_value());
    const fixed::SampleOut m = fixed::sample_model(sample_params_fixed(p, vocab), all, bitmap(vocab, history));
    EXPECT_EQ(as_map(*k), as_map(m));
    if (p.repetition_penalty == 1.0f) {
      EXPECT_GT(k->prob_of(500), k->prob_of(400));
    }
    PositionLogits only_q16 = w;  // what collect reports for a wide top-k: Q16 only
    only_q16.full.clear();
    const auto k2 = kernel_distribution(progs, only_q16, p, history);
    ASSERT_TRUE(k2.has_value());
    EXPECT_EQ(k2->tokens, k->tokens);
  }
  PositionLogits floats_only = w;  // |logit| >= 32768 as a float: the kernel declines (logged once)
  floats_only.full_q16.clear();
  EXPECT_FALSE(kernel_distribution(progs, floats_only, SamplingParams{.temperature = 1.0f}, {}).has_value());

  PositionLogits mismatched = s;  // Q16 values that do not match the list
  mismatched.top_k_q16.pop_back();
  EXPECT_THROW(kernel_distribution(progs, mismatched, SamplingParams{.temperature = 1.0f}, {}), Error);
}

// A vocabulary above QN_SAMPLE_MAX (not Qwen3's): its top-k lists are still
// the kernel's; the whole vocabulary is declined (logged once) and left to
// the float Sampler, the one documented degradation.
TEST(SampleKernel, DeclinesMoreCandidatesThanItTakesButNotTheirTopKList) {
  const uint32_t vocab = QN_SAMPLE_MAX + 32;
  BpfPrograms& progs = programs(vocab);
  PositionLogits s;
  for (uint32_t i = 0; i < vocab; i++) s.full_q16.push_back(int32_t(i % 977) * 1000);
  const SamplingParams p{.temperature = 1.0f, .top_p = 0.9f};
  EXPECT_FALSE(kernel_distribution(progs, s, p, {}).has_value());
  for (int32_t id = vocab - 20; id < int32_t(vocab); id++) {
    s.top_k.push_back({id, float(id) / 65536.0f});
    s.top_k_q16.push_back(id);
  }
  s.full_q16.clear();
  const auto k = kernel_distribution(progs, s, p, {});
  ASSERT_TRUE(k.has_value());
  EXPECT_FALSE(k->tokens.empty());
}

TEST(SampleFormulas, ExponentialAndTemperatureFactorWithinTheirBounds) {
  std::mt19937_64 rng(7);
  const double exp_rel = 3 * std::ldexp(1, -30) + std::ldexp(1, -31) + std::ldexp(1, -33);
  double worst = 0, rel = 0;
  for (int i = 0; i < 200000; i++) {
    const uint64_t t = i < 65536 ? (uint64_t(i) << 16) | (rng() & 0xffff) : rng() % (uint64_t(46) << 32);
    const double want = std::ldexp(std::exp2(-std::ldexp(double(t), -32)), 44);
    const double got = double(qn_exp2_neg_q44(t));
    const double err = std::fabs(got - want) / (want * exp_rel + 0.5);
    worst = std::max(worst, err);
    if (want > std::ldexp(1, 34)) rel = std::max(rel, std::fabs(got - want) / want);
    ASSERT_LE(err, 1.0) << "t " << t;
  }
  EXPECT_EQ(qn_exp2_neg_q44(0), uint64_t(1) << 44);
  EXPECT_EQ(qn_exp2_neg_q44(uint64_t(46) << 32), 0u);
  std::printf("2^-t: worst error %.3g of its bound; relative %.3g above 2^-10 (bound %.3g)\n", worst, rel, exp_rel);
  for (int i = 0; i < 20000; i++) {
    const float T = float(std::exp(std::uniform_real_distribution<double>(std::log(1e-3), std::log(1e12))(rng)));
    const qn_sample_hdr h = sample_params_fixed({.temperature = T}, 1);
    int csh = 0;
    const uint64_t cm = qn_temp_factor(h.tm, h.te, &csh);
    ASSERT_GE(cm, uint64_t(1) << 31);
    ASSERT_LT(cm, uint64_t(1) << 32);
    const double c = std::ldexp(double(cm), -csh), want = 65536.0 / std::log(2.0) / double(T);
    ASSERT_LE(std::fabs(c - want) / want, std::ldexp(1, -31)) << "T " << T;
  }
}

struct FloatView {
  double margin = 1e300;  // how close the float's cut decisions came to their thresholds
};

// The float Sampler's decisions, recomputed in double, and how far each one
// was from flipping (relative to the probability scale).
FloatView float_margins(const PositionLogits& s, const SamplingParams& p, std::span<const int32_t> history) {
  std::vector<std::pair<int32_t, float>> cand;
  if (!s.full.empty())
    for (size_t i = 0; i < s.full.size(); i++) cand.push_back({int32_t(i), s.full[i]});
  else
    cand = s.top_k;
  std::set<int32_t> seen(history.begin(), history.end());
  if (p.repetition_penalty != 1.0f)
    for (auto& [id, l] : cand)
      if (seen.count(id)) l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
  std::stable_sort(cand.begin(), cand.end(), [](auto& a, auto& b) { return a.second > b.second; });
  FloatView v;
  const double Tn = double(p.temperature);
  if (p.top_k > 0 && size_t(p.top_k) < cand.size()) {
    const double gap = double(cand[p.top_k - 1].second) - double(cand[p.top_k].second);
    if (gap > 0) v.margin = std::min(v.margin, gap / Tn);
    cand.resize(p.top_k);
  }
  const double best = cand[0].second;
  double total = 0;
  std::vector<double> u;
  for (auto& c : cand) u.push_back(std::exp((double(c.second) - best) / Tn)), total += u.back();
  size_t keep = cand.size();
  if (p.min_p > 0) {
    keep = 0;
    for (size_t i = 0; i < u.size(); i++) {
      v.margin = std::min(v.margin, std::fabs(u[i] - double(p.min_p)) / std::max(u[i], 1e-300));
      if (u[i] >= double(p.min_p)) keep = i + 1;
    }
  }
  if (p.top_p < 1.0f) {
    double acc = 0;
    for (size_t i = 0; i < keep; i++) {
      acc += u[i] / total;
      v.margin = std::min(v.margin, std::fabs(acc - double(p.top_p)));
      if (acc >= double(p.top_p)) break;
    }
  }
  return v;
}

TEST(SampleProgram, WithinTheDerivedBoundOfTheFloatSampler) {
  const uint32_t vocab = 5000;
  BpfPrograms& progs = programs(vocab);
  std::mt19937_64 rng(29);
  double worst = 0, worst_ratio = 0, worst_plain = 0;
  int judged = 0, near_threshold = 0;
  for (int iter = 0; iter < 500; iter++) {
    const uint32_t sizes[] = {20, 64, 1000, vocab};
    const uint32_t n = sizes[rng() % 4];
    const double sigmas[] = {0.5, 2.0, 6.0};
    auto raw = random_logits(rng, n, sigmas[rng() % 3], true, vocab);
    SamplingParams p = random_params(rng);
    PositionLogits s;
    const bool full = n == vocab;
    std::vector<int32_t> history = random_history(rng, raw);
    if (full) {
      s.full.resize(vocab);
      for (auto& c : raw) s.full[c.id] = c.logit / 65536.0f;
    } else {
      for (auto& c : raw) s.top_k.push_back({c.id, c.logit / 65536.0f});
    }
    const auto kd = kernel_distribution(progs, s, p, history);
    ASSERT_TRUE(kd.has_value());
    const TokenDistribution fd = Sampler(p).distribution(s, history);
    double lmax = 0;
    for (auto& c : raw) lmax = std::max(lmax, std::fabs(c.logit / 65536.0));
    const bool pen = p.repetition_penalty != 1.0f;
    // penalised logits: Q16 rounding of the quotient or product, and the float's own rounding of it
    const double dpen = pen ? 2 * (std::ldexp(1, -17) + lmax * std::ldexp(1, -24)) / p.temperature : 0;
    const double delta = std::expm1(kWeightRel + dpen);
    const double bound = delta / (1 - delta) * 1.01 + kd->tokens.size() * std::ldexp(1, -40) + std::ldexp(1, -31) +
                         n * std::ldexp(1, -44);
    const FloatView fv = float_margins(s, p, history);
    if (p.temperature >= kMinSamplingTemperature && fv.margin < 4 * delta + n * std::ldexp(1, -44)) {
      near_threshold++;  // the float's cut sits within the fixed point's precision of a threshold
      continue;
    }
    std::map<int32_t, double> a, b;
    for (auto& [id, q] : kd->tokens) a[id] += q;
    for (auto& [id, q] : fd.tokens) b[id] += q;
    double tv = 0;
    for (auto& [id, q] : a) tv += std::fabs(q - (b.count(id) ? b[id] : 0.0));
    for (auto& [id, q] : b)
      if (!a.count(id)) tv += q;
    tv /= 2;
    ASSERT_LE(tv, bound) << "iteration " << iter << ": " << p.temperature << " k " << p.top_k << " p " << p.top_p
                         << " min_p " << p.min_p << " pen " << p.repetition_penalty << " n " << n;
    // Both in candidate order (the order the seeded draw walks): the same
    // kept set comes in the same order, cut or not, penalised or not.
    std::vector<int32_t> kid, fid;
    for (auto& t : kd->tokens) kid.push_back(t.first);
    for (auto& t : fd.tokens) fid.push_back(t.first);
    if (std::set<int32_t>(kid.begin(), kid.end()) == std::set<int32_t>(fid.begin(), fid.end()))
      ASSERT_EQ(kid, fid) << iter;
    worst = std::max(worst, tv);
    if (!pen) worst_plain = std::max(worst_plain, tv);
    worst_ratio = std::max(worst_ratio, tv / bound);
    judged++;
  }
  std::printf("judged %d, near a threshold %d; max TV %.3g (without a penalty %.3g), max TV / bound %.3g\n", judged,
              near_threshold, worst, worst_plain, worst_ratio);
  EXPECT_GE(judged, 400);
}

// ---- the log-normalizer of the reported logprobs (QN_SAMPLE_LSE) --------------

namespace lse {

// Runs the program's log-normalizer mode on raw candidates.
int64_t run_kernel_lse(BpfPrograms& progs, const std::vector<qn_topk_entry>& cand, uint32_t flags = QN_SAMPLE_LSE) {
  uint8_t* b = progs.sample_buf();
  std::copy(cand.begin(), cand.end(), reinterpret_cast<qn_topk_entry*>(b + qn_sample_cand_off()));
  qn_sample_hdr h{};
  h.n = uint32_t(cand.size());
  h.flags = flags;
  h.kept = 77;
  *progs.sample_hdr() = h;
  progs.sample();
  EXPECT_EQ(progs.sample_hdr()->kept, 0u);
  return progs.sample_hdr()->lse_q16;
}

// The exact log-sum-exp (nats) of the same Q16 logits, in long double.
long double exact_lse(const std::vector<qn_topk_entry>& cand) {
  int32_t M = cand[0].logit;
  for (const auto& c : cand) M = std::max(M, c.logit);
  long double s = 0;
  for (const auto& c : cand) s += std::exp((long double)(int64_t(c.logit) - M) / 65536.0L);
  return (long double)M / 65536.0L + std::log(s);
}

// The derived bound on |lse_kernel / 2^16 - lse| in nats (docs/numerics.md,
// "Logprobs in BPF"), lse the exact log-sum-exp of the same Q16 logits. Each
// weight is within kWeightRel of 2^44 exp(l - M) (T = 1: the same table
// exponential and temperature factor as sampling) plus half a Q44 unit of
// rounding (a weight dropped from 46 octaves on is below a quarter unit), so
// S is within x = kWeightRel + n 2^-45 of 2^44 sum exp(l - M) relatively
// (that sum is >= 1: the best's own term); ln turns that into at most
// x / (1 - x) nats; the logarithm's truncations (log2 bit by bit in Q57,
// times ln 2 in Q62) add < 2^-40; rounding to Q16 adds 2^-17, which
// dominates: 7.63e-6 nats, 7.65e-6 at 151,936 candidates.
double lse_bound(size_t n) {
  const double x = kWeightRel + double(n) * std::ldexp(1, -45);
  return std::ldexp(1, -17) + x / (1 - x) + std::ldexp(1, -40);
}

struct Judge {
  double worst = 0, worst_ratio = 0, worst_units = 0, worst_sum = 0;
  int cases = 0, not_nearest = 0;
  // kernel == model bit for bit, and within the bound of the exact value
  void check(BpfPrograms& progs, const std::vector<qn_topk_entry>& cand, const std::string& what) {
    const int64_t k = run_kernel_lse(progs, cand);
    const int64_t m = fixed::lse_model(cand);
    ASSERT_EQ(k, m) << what;
    const long double exact = exact_lse(cand);
    const double err = double(std::fabs((long double)k / 65536.0L - exact));
    ASSERT_LE(err, lse_bound(cand.size())) << what << ": lse " << k << " exact " << double(exact * 65536.0L);
    worst = std::max(worst, err);
    worst_ratio = std::max(worst_ratio, err / lse_bound(cand.size()));
    worst_units = std::max(worst_units, double(err * 65536.0));
    if (k != int64_t(std::llround(exact * 65536.0L))) not_nearest++;
    // the weights' part alone: M + ln(S / 2^44) before the logarithm and its rounding
    const fixed::LseSum ws = fixed::lse_sum_model(cand);
    const long double unrounded = (long double)ws.M / 65536.0L + std::log((long double)ws.S / std::ldexp(1.0L, 44));
    worst_sum = std::max(worst_sum, double(std::fabs(unrounded - exact)));
    cases++;
  }
  void print(const char* name) const {
    std::printf("%s: %d cases, max |lse - exact| %.3g nats (%.4f Q16 units; %.3f of the bound), %d not the nearest "
                "Q16 value; the weights' sum alone (before ln and rounding) %.3g nats\n",
                name, cases, worst, worst_units, worst_ratio, not_nearest, worst_sum);
  }
};

}  // namespace lse

TEST(SampleLse, EqualsModelAndWithinTheBoundOnRandomInputs) {
  const uint32_t vocab = 5000;
  BpfPrograms& progs = programs(vocab);
  std::mt19937_64 rng(41);
  lse::Judge j;
  for (int iter = 0; iter < 400; iter++) {
    const uint32_t sizes[] = {1, 2, 20, 64, 300, vocab};
    const uint32_t n = sizes[rng() % 6];
    const double sigmas[] = {0.01, 0.5, 2.0, 8.0, 40.0};
    auto cand = random_logits(rng, n, sigmas[rng() % 5], rng() % 2, vocab);
    if (iter % 10 == 0)  // anywhere in int32, saturated extremes included
      for (auto& c : cand) c.logit = int32_t(int64_t(rng() % (uint64_t(1) << 32)) - (int64_t(1) << 31) + 1);
    j.check(progs, cand, "iteration " + std::to_string(iter) + " n " + std::to_string(n));
    if (HasFatalFailure()) return;
  }
  j.print("lse, random");
}

TEST(SampleLse, EdgeInputs) {
  const uint32_t vocab = 5000;
  BpfPrograms& progs = programs(vocab);
  lse::Judge j;
  auto flat = [&](uint32_t n, int32_t v) {
    std::vector<qn_topk_entry> c(n);
    for (uint32_t i = 0; i < n; i++) c[i] = {int32_t(i), v};
    return c;
  };
  // one candidate: lse is its logit, its logprob exactly 0
  for (int32_t v : {0, 12345, -(7 << 16), INT32_MAX, -INT32_MAX}) {
    const std::vector<qn_topk_entry> one = {{42, v}};
    EXPECT_EQ(lse::run_kernel_lse(progs, one), int64_t(v));
    j.check(progs, one, "one candidate " + std::to_string(v));
  }
  // all equal: M + ln n, the nearest Q16 value
  for (uint32_t n : {2u, 3u, 1000u, vocab})
    for (int32_t v : {0, -(100 << 16), INT32_MAX}) {
      const int64_t k = lse::run_kernel_lse(progs, flat(n, v));
      EXPECT_EQ(k, int64_t(v) + std::llround(std::log(double(n)) * 65536.0)) << n << " " << v;
      j.check(progs, flat(n, v), "all equal n " + std::to_string(n));
    }
  EXPECT_GT(lse::run_kernel_lse(progs, flat(vocab, INT32_MAX)), int64_t(INT32_MAX));  // beyond int32: int64
  {  // a huge spread: the rest underflow to exactly 0
    auto c = flat(vocab, -(200 << 16));
    c[1234].logit = 200 << 16;
    EXPECT_EQ(lse::run_kernel_lse(progs, c), int64_t(200 << 16));
    j.check(progs, c, "one far above");
    c[1234].logit = INT32_MAX;
    c[17].logit = -INT32_MAX;
    EXPECT_EQ(lse::run_kernel_lse(progs, c), int64_t(INT32_MAX));
    j.check(progs, c, "saturated");
  }
  {  // a ramp through the underflow: 0 down to -40 nats, weights from 1 to below 2^-46
    std::vector<qn_topk_entry> c(vocab);
    for (uint32_t i = 0; i < vocab; i++) c[i] = {int32_t(i), -int32_t(uint64_t(i) * (40u << 16) / vocab)};
    j.check(progs, c, "ramp");
    for (auto& e : c) e.logit += 1 << 29;  // the same 8,192 higher
    j.check(progs, c, "ramp, shifted");
  }
  {  // two equal best, the rest at the edge of the weights' range (31.9 nats: 46 octaves)
    auto c = flat(vocab, -int32_t(std::lround(46 * std::log(2.0) * 65536)));
    c[0].logit = c[4999].logit = 0;
    j.check(progs, c, "edge of the range");
  }
  j.print("lse, edge cases");
}

TEST(SampleLse, EqualsModelOverTheQwenVocabulary) {
  BpfPrograms& progs = programs(kQwenVocab);
  std::mt19937_64 rng(43);
  lse::Judge j;
  double best_us = 1e30;
  for (int iter = 0; iter < 6; iter++) {
    auto cand = random_logits(rng, kQwenVocab, iter % 3 == 0 ? 0.3 : iter % 3 == 1 ? 3.0 : 8.0, false, kQwenVocab);
    if (iter == 5)
      for (auto& c : cand) c.logit = 5 << 16;  // all equal: M + ln 151,936
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t k = lse::run_kernel_lse(progs, cand);
    best_us = std::min(best_us, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (iter == 5) {
      EXPECT_EQ(k, (int64_t(5) << 16) + std::llround(std::log(double(kQwenVocab)) * 65536.0));
    }
    j.check(progs, cand, "vocabulary, iteration " + std::to_string(iter));
    if (HasFatalFailure()) return;
  }
  j.print("lse, 151,936 candidates");
  std::printf("one QN_SAMPLE_LSE call over 151,936 candidates (wall, fastest of 6, busy host): %.0f us\n", best_us);
}

TEST(SampleLse, RejectsOtherFlagsAndBadInput) {
  BpfPrograms& progs = programs(1000);
  std::vector<qn_topk_entry> cand = {{1, 0}, {2, 1 << 16}};
  EXPECT_NO_THROW(lse::run_kernel_lse(progs, cand));
  EXPECT_THROW(lse::run_kernel_lse(progs, cand, QN_SAMPLE_LSE | QN_SAMPLE_PENALTY), Error);
  EXPECT_THROW(lse::run_kernel_lse(progs, cand, QN_SAMPLE_LSE | QN_SAMPLE_GREEDY), Error);
  EXPECT_THROW(lse::run_kernel_lse(progs, {}), Error);
  cand[1].id = 1000;  // outside the vocabulary
  EXPECT_THROW(lse::run_kernel_lse(progs, cand), Error);
}

TEST(SampleFormulas, LogarithmWithinHalfAQ16UnitOfDouble) {
  std::mt19937_64 rng(47);
  double worst = 0;
  EXPECT_EQ(qn_ln_q44_q16(uint64_t(1) << 44), 0);
  for (int k = 0; k < 18; k++)
    EXPECT_EQ(qn_ln_q44_q16(uint64_t(1) << (44 + k)), std::llround(k * std::log(2.0) * 65536.0)) << k;
  for (int i = 0; i < 100000; i++) {
    const int bits = 45 + int(rng() % 18);  // S in [2^44, 2^62)
    const uint64_t S = std::max(uint64_t(1) << 44, rng() >> (64 - bits));
    const long double want = std::log((long double)S / std::ldexp(1.0L, 44)) * 65536.0L;
    const double err = double(std::fabs((long double)qn_ln_q44_q16(S) - want));
    worst = std::max(worst, err);
    ASSERT_LE(err, 0.5 + std::ldexp(1, -24)) << "S " << S;  // the rounding, and the truncations' < 2^-40 nats
  }
  std::printf("ln(S / 2^44) in Q16: max |error| %.6f units (the rounding's 0.5 + < 2^-24)\n", worst);
}

// position_logprobs (daemon/sampling), the one place the reported logprobs
// are computed: from the kernel's normalizer when the backend gives it,
// (l_q16 - lse) / 2^16 exactly, within the bound above (and the two floats'
// roundings) of the float log-softmax, in the same order.
class KernelLseBackend : public Backend {
 public:
  KernelLseBackend(BpfPrograms& progs, bool give) : progs_(progs), give_(give),
      cfg_(config_with_vocab(progs.layout().shape.vocab)) {}
  const ModelConfig& config() const override { return cfg_; }
  BackendInfo info() const override {
    BackendInfo i;
    i.name = "test";
    return i;
  }
  std::unique_ptr<KvCache> create_kv(int) override { throw Error("no KV"); }
  ForwardResult forward(KvCache&, std::span<const int32_t>, const ForwardWants&) override { throw Error("no forward"); }
  std::optional<int64_t> log_normalizer_q16(const PositionLogits& s) override {
    calls++;
    return give_ ? kernel_log_normalizer(progs_, s) : std::nullopt;
  }
  int calls = 0;

 private:
  BpfPrograms& progs_;
  bool give_;
  ModelConfig cfg_;
};

TEST(SampleLse, PositionLogprobsAreTheKernelsAndCloseToFloat) {
  const uint32_t vocab = 5000;
  BpfPrograms& progs = programs(vocab);
  KernelLseBackend kb(progs, true), declines(progs, false);
  std::mt19937_64 rng(53);
  double worst = 0;
  for (int iter = 0; iter < 60; iter++) {
    const bool full = iter % 2 == 0;
    auto raw = random_logits(rng, full ? vocab : 20 + uint32_t(rng() % 45), iter % 3 == 0 ? 0.5 : 4.0, true, vocab);
    PositionLogits s;
    if (full) {
      s.full.resize(vocab);
      s.full_q16.resize(vocab);
      for (auto& c : raw) s.full[c.id] = c.logit / 65536.0f, s.full_q16[c.id] = c.logit;
      if (iter % 4 == 2) s.full.clear();  // Q16 only, as for a wide top-k
    } else {
      for (auto& c : raw) s.top_k.push_back({c.id, c.logit / 65536.0f}), s.top_k_q16.push_back(c.logit);
    }
    std::vector<qn_topk_entry> cand;
    if (full)
      for (uint32_t i = 0; i < vocab; i++) cand.push_back({int32_t(i), s.full_q16[i]});
    else
      cand = raw;
    const int32_t chosen = raw[rng() % raw.size()].id;
    const int calls0 = kb.calls;
    const PositionLogprobs k = position_logprobs(s, 8, &kb, chosen);
    ASSERT_EQ(kb.calls - calls0, 1);
    ASSERT_TRUE(k.kernel);
    const int64_t L = fixed::lse_model(cand);
    ASSERT_EQ(kernel_log_normalizer(progs, s).value(), L);
    const PositionLogprobs f = position_logprobs(s, 8, nullptr, chosen);
    const PositionLogprobs d = position_logprobs(s, 8, &declines, chosen);
    ASSERT_FALSE(f.kernel);
    ASSERT_FALSE(d.kernel);
    ASSERT_EQ(k.top.size(), 8u);
    ASSERT_EQ(f.top.size(), 8u);
    auto q16_of = [&](int32_t id) {
      for (auto& c : cand)
        if (c.id == id) return c.logit;
      ADD_FAILURE() << "id " << id;
      return 0;
    };
    for (size_t r = 0; r < 8; r++) {
      // the logits below 256: the floats are exact, so the same order and ties by the lower id
      ASSERT_EQ(k.top[r].id, f.top[r].id) << iter << " rank " << r;
      ASSERT_EQ(d.top[r].id, f.top[r].id);
      ASSERT_EQ(d.top[r].logprob, f.top[r].logprob);
      ASSERT_EQ(k.top[r].logit, f.top[r].logit);
      const int32_t q = q16_of(k.top[r].id);
      ASSERT_EQ(k.top[r].logprob, float(double(int64_t(q) - L) / 65536.0)) << iter;  // two kernel integers
      if (r > 0) {
        ASSERT_LE(k.top[r].logprob, k.top[r - 1].logprob);
      }
      const double e = std::fabs(double(k.top[r].logprob) - double(f.top[r].logprob));
      // the bound, and each float's rounding (half an ulp of |logprob|)
      ASSERT_LE(e, lse::lse_bound(cand.size()) + 2 * std::fabs(double(f.top[r].logprob)) * std::ldexp(1, -24))
          << iter << " rank " << r;
      worst = std::max(worst, e);
    }
    ASSERT_TRUE(k.chosen && f.chosen);
    EXPECT_EQ(*k.chosen, float(double(int64_t(q16_of(chosen)) - L) / 65536.0));
    EXPECT_LE(std::fabs(double(*k.chosen) - double(*f.chosen)),
              lse::lse_bound(cand.size()) + 2 * std::fabs(double(*f.chosen)) * std::ldexp(1, -24));
    // Sampler::top_logprobs is the same function
    const auto tl = Sampler::top_logprobs(s, 8, &kb);
    ASSERT_EQ(tl.size(), 8u);
    for (size_t r = 0; r < 8; r++) EXPECT_EQ(tl[r], std::make_pair(k.top[r].id, k.top[r].logprob));
  }
  std::printf("position_logprobs: kernel vs float log-softmax, max |difference| %.3g nats (bound %.3g + float rounding)\n",
              worst, lse::lse_bound(vocab));
  // scores without Q16 logits: not asked for, the float path
  PositionLogits floats;
  floats.top_k = {{3, 1.5f}, {9, 0.25f}};
  const int calls0 = kb.calls;
  const PositionLogprobs p = position_logprobs(floats, 2, &kb, 9);
  EXPECT_EQ(kb.calls, calls0);
  EXPECT_FALSE(p.kernel);
  ASSERT_EQ(p.top.size(), 2u);
  EXPECT_NEAR(std::exp(p.top[0].logprob) + std::exp(*p.chosen), 1.0, 1e-6);
  // nothing asked: no call
  EXPECT_TRUE(position_logprobs(floats, 0, &kb).top.empty());
  EXPECT_EQ(kb.calls, calls0);
}

}  // namespace
}  // namespace qwen3::engine
