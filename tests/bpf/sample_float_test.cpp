// qn_sample against the float Sampler: the same kept set and a total-variation
// distance within the bound derived from the fixed-point precision
// (docs/numerics.md); the backend's exact Q16 logits used where float cannot
// tell them apart or hold them; the bound's two parts on their own.
#include "sample_cases.h"

namespace qwen3::engine {
namespace {

using namespace samplecases;


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
    const auto k = kernel_distribution(progs, s, kernel_params(p), {});
    ASSERT_TRUE(k.has_value());
    const fixed::SampleOut m = fixed::sample_model(sample_hdr(kernel_params(p), uint32_t(list.size())), list, {});
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
    const auto r = kernel_distribution(progs, rounded, kernel_params(p), {});
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
    const auto k = kernel_distribution(progs, w, kernel_params(p), {});
    ASSERT_TRUE(k.has_value());
    EXPECT_EQ(as_map(*k), as_map(fixed::sample_model(sample_hdr(kernel_params(p), vocab), all, {})));
    ASSERT_EQ(k->tokens.size(), 1u);
    EXPECT_EQ(k->tokens[0].first, 7);
    PositionLogits r = w;
    r.full_q16.clear();
    const auto kr = kernel_distribution(progs, r, kernel_params(p), {});
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
    const auto k = kernel_distribution(progs, w, kernel_params(p), history);
    ASSERT_TRUE(k.has_value());
    const fixed::SampleOut m = fixed::sample_model(sample_hdr(kernel_params(p), vocab), all, bitmap(vocab, history));
    EXPECT_EQ(as_map(*k), as_map(m));
    if (p.repetition_penalty == 1.0f) {
      EXPECT_GT(k->prob_of(500), k->prob_of(400));
    }
    PositionLogits only_q16 = w;  // what collect reports for a wide top-k: Q16 only
    only_q16.full.clear();
    const auto k2 = kernel_distribution(progs, only_q16, kernel_params(p), history);
    ASSERT_TRUE(k2.has_value());
    EXPECT_EQ(k2->tokens, k->tokens);
  }
  PositionLogits floats_only = w;  // |logit| >= 32768 as a float: the kernel declines (logged once)
  floats_only.full_q16.clear();
  EXPECT_FALSE(kernel_distribution(progs, floats_only, kernel_params(SamplingParams{.temperature = 1.0f}), {}).has_value());

  PositionLogits mismatched = s;  // Q16 values that do not match the list
  mismatched.top_k_q16.pop_back();
  EXPECT_THROW(kernel_distribution(progs, mismatched, kernel_params(SamplingParams{.temperature = 1.0f}), {}), Error);
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
  EXPECT_FALSE(kernel_distribution(progs, s, kernel_params(p), {}).has_value());
  for (int32_t id = vocab - 20; id < int32_t(vocab); id++) {
    s.top_k.push_back({id, float(id) / 65536.0f});
    s.top_k_q16.push_back(id);
  }
  s.full_q16.clear();
  const auto k = kernel_distribution(progs, s, kernel_params(p), {});
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
    const qn_sample_hdr h = sample_hdr(kernel_params({.temperature = T}), 1);
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
    const auto kd = kernel_distribution(progs, s, kernel_params(p), history);
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
    if (std::set<int32_t>(kid.begin(), kid.end()) == std::set<int32_t>(fid.begin(), fid.end())) {
      ASSERT_EQ(kid, fid) << iter;
    }
    worst = std::max(worst, tv);
    if (!pen) worst_plain = std::max(worst_plain, tv);
    worst_ratio = std::max(worst_ratio, tv / bound);
    judged++;
  }
  std::printf("judged %d, near a threshold %d; max TV %.3g (without a penalty %.3g), max TV / bound %.3g\n", judged,
              near_threshold, worst, worst_plain, worst_ratio);
  EXPECT_GE(judged, 400);
}

}  // namespace
}  // namespace qwen3::engine
