#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

#include "common/error.h"

namespace qwen3 {
namespace {

PositionLogits full_scores(std::vector<float> logits) {
  PositionLogits s;
  s.full = std::move(logits);
  s.argmax = static_cast<int32_t>(std::max_element(s.full.begin(), s.full.end()) - s.full.begin());
  return s;
}

TEST(Sampler, GreedyTakesTheBackendArgmaxAndAsksOnlyForIt) {
  Sampler s({});
  EXPECT_EQ(s.wants().top_k, 1);
  EXPECT_FALSE(s.wants().full_logits);
  PositionLogits p;
  p.argmax = 42;
  p.top_k = {{42, 3.0f}};
  EXPECT_EQ(s.sample(p, {}), 42);
}

TEST(Sampler, RejectsOutOfRangeParameters) {
  EXPECT_THROW(Sampler({.temperature = -1.0f}), Error);
  EXPECT_THROW(Sampler({.top_k = -2}), Error);
  EXPECT_THROW(Sampler({.top_p = 0.0f}), Error);
  EXPECT_THROW(Sampler({.top_p = 1.5f}), Error);
  EXPECT_THROW(Sampler({.min_p = 1.0f}), Error);
  EXPECT_THROW(Sampler({.repetition_penalty = 0.0f}), Error);
  try {
    Sampler({.top_p = 2.0f});
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos);
  }
}

TEST(Sampler, RepetitionPenaltyCanChangeTheGreedyChoice) {
  Sampler s({.repetition_penalty = 2.0f});
  EXPECT_TRUE(s.wants().full_logits);
  auto scores = full_scores({1.0f, 1.5f, 0.2f});
  const int32_t seen[] = {1};
  EXPECT_EQ(s.sample(scores, seen), 0);  // 1.5 / 2 = 0.75 < 1.0
  EXPECT_EQ(s.sample(scores, {}), 1);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(float(i)) * 2.0f;
  auto scores = full_scores(logits);
  auto run = [&](uint64_t seed) {
    Sampler s({.temperature = 1.0f, .seed = seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 40; ++i) out.push_back(s.sample(scores, {}));
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Sampler, TopKLimitsTheCandidatesAndUsesKernelTopK) {
  Sampler s({.temperature = 5.0f, .top_k = 2, .seed = 1});
  EXPECT_EQ(s.wants().top_k, 2);
  EXPECT_FALSE(s.wants().full_logits);
  PositionLogits p;
  p.argmax = 3;
  p.top_k = {{3, 2.0f}, {9, 1.9f}};
  std::map<int32_t, int> counts;
  for (int i = 0; i < 400; ++i) counts[s.sample(p, {})]++;
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts[3], 100);
  EXPECT_GT(counts[9], 100);
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  // Two tokens with logits differing by ln(3): probabilities 0.75 / 0.25.
  Sampler s({.temperature = 1.0f, .seed = 3});
  auto scores = full_scores({std::log(3.0f), 0.0f});
  int zeros = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) zeros += s.sample(scores, {}) == 0;
  EXPECT_NEAR(double(zeros) / n, 0.75, 0.02);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  // p = {0.6, 0.3, 0.1}: top_p 0.8 keeps the first two only.
  Sampler s({.temperature = 1.0f, .top_p = 0.8f, .seed = 5});
  auto scores = full_scores({std::log(0.6f), std::log(0.3f), std::log(0.1f)});
  std::map<int32_t, int> counts;
  for (int i = 0; i < 3000; ++i) counts[s.sample(scores, {})]++;
  EXPECT_EQ(counts.count(2), 0u);
  EXPECT_GT(counts[1], 500);
}

TEST(Sampler, DistributionIsTheKeptSetRenormalised) {
  // p = {0.6, 0.3, 0.1}: top_p 0.8 keeps {0, 1}, renormalised to 2/3 and 1/3.
  Sampler cut({.temperature = 1.0f, .top_p = 0.8f, .seed = 5});
  auto scores = full_scores({std::log(0.6f), std::log(0.3f), std::log(0.1f)});
  const TokenDistribution d = cut.distribution(scores, {});
  ASSERT_EQ(d.tokens.size(), 2u);
  EXPECT_EQ(d.tokens[0].first, 0);
  EXPECT_NEAR(d.prob_of(0), 2.0 / 3.0, 1e-6);
  EXPECT_NEAR(d.prob_of(1), 1.0 / 3.0, 1e-6);
  EXPECT_EQ(d.prob_of(2), 0.0);
  // Nothing cut: every token, summing to 1; greedy: one token with probability 1.
  Sampler all({.temperature = 1.0f, .seed = 5});
  const TokenDistribution e = all.distribution(scores, {});
  ASSERT_EQ(e.tokens.size(), 3u);
  double sum = 0;
  for (const auto& t : e.tokens) sum += t.second;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_NEAR(e.prob_of(2), 0.1, 1e-6);
  Sampler greedy({});
  const TokenDistribution g = greedy.distribution(scores, {});
  ASSERT_EQ(g.tokens.size(), 1u);
  EXPECT_EQ(g.tokens[0].first, 0);
  EXPECT_EQ(g.tokens[0].second, 1.0);
}

TEST(Sampler, DrawsFollowTheProbabilitiesAndAreOneRuleForEveryPath) {
  // {0: 0.5, 1: 0.3, 2: 0.2}: frequencies over draw indices.
  TokenDistribution d;
  d.tokens = {{0, 0.5}, {1, 0.3}, {2, 0.2}};
  std::map<int32_t, int> counts;
  const int n = 20000;
  Sampler s({.temperature = 1.0f, .seed = 11});
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(s.draws(), uint64_t(i));
    const int32_t t = s.draw(d);
    ASSERT_EQ(t, draw_token(d, 11, uint64_t(i)));  // the Sampler's draw i is draw_token's
    counts[t]++;
  }
  EXPECT_NEAR(double(counts[0]) / n, 0.5, 0.02);
  EXPECT_NEAR(double(counts[1]) / n, 0.3, 0.02);
  EXPECT_NEAR(double(counts[2]) / n, 0.2, 0.02);
  // Another seed, another sequence; a probability that rounds to 0 in Q40 is never drawn.
  int same = 0;
  for (int i = 0; i < 200; ++i) same += draw_token(d, 11, i) == draw_token(d, 12, i);
  EXPECT_LT(same, 120);  // independent: ~38% agree
  TokenDistribution tiny;
  tiny.tokens = {{4, 1e-13}, {5, 1.0 - 1e-13}};
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(draw_token(tiny, 3, i), 5);
  TokenDistribution none;
  EXPECT_THROW(draw_token(none, 1, 0), Error);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  // p = {0.6, 0.3, 0.1}: min_p 0.2 drops token 2 (0.1 < 0.2 * 0.6).
  Sampler s({.temperature = 1.0f, .min_p = 0.2f, .seed = 9});
  auto scores = full_scores({std::log(0.6f), std::log(0.3f), std::log(0.1f)});
  for (int i = 0; i < 3000; ++i) ASSERT_NE(s.sample(scores, {}), 2);
}

TEST(Sampler, TopLogprobsAreNormalisedAndSorted) {
  auto scores = full_scores({0.0f, std::log(3.0f)});
  auto lp = Sampler::top_logprobs(scores, 2);
  ASSERT_EQ(lp.size(), 2u);
  EXPECT_EQ(lp[0].first, 1);
  EXPECT_NEAR(std::exp(lp[0].second), 0.75, 1e-5);
  EXPECT_NEAR(std::exp(lp[1].second), 0.25, 1e-5);
}

// The sampling rule written the plain way (whole vocabulary stably sorted,
// probabilities summed in that order), as the sampler's specification; the
// kept tokens in id order (candidate order) for the seeded draw `index`.
int32_t plain_sample(const std::vector<float>& logits, const SamplingParams& p, uint64_t index) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (p.top_k > 0 && ids.size() > size_t(p.top_k)) ids.resize(p.top_k);
  std::vector<double> pr(ids.size());
  double total = 0;
  for (size_t i = 0; i < ids.size(); ++i) total += pr[i] = std::exp(double(logits[ids[i]] - logits[ids[0]]) / p.temperature);
  for (auto& x : pr) x /= total;
  size_t keep = ids.size();
  if (p.min_p > 0) {
    keep = 1;
    while (keep < pr.size() && pr[keep] >= p.min_p * pr[0]) ++keep;
  }
  if (p.top_p < 1) {
    double acc = 0;
    size_t n = 0;
    while (n < keep) {
      acc += pr[n++];
      if (acc >= p.top_p) break;
    }
    keep = std::max<size_t>(n, 1);
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += pr[i];
  std::map<int32_t, double> by_id;
  for (size_t i = 0; i < keep; ++i) by_id[ids[i]] = pr[i] / kept;
  TokenDistribution d;
  d.tokens.assign(by_id.begin(), by_id.end());
  return draw_token(d, p.seed, index);
}

TEST(Sampler, FullVocabularyChoicesMatchThePlainRuleIncludingTies) {
  // A vocabulary-sized score vector with many exact ties (logits on a 1/8 grid):
  // the sampler sorts only the prefix it walks, so check it picks what the
  // whole-vocabulary rule picks, draw for draw.
  std::mt19937 gen(11);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> logits(151936);
  for (auto& l : logits) l = std::round(nd(gen) * 8.0f) / 8.0f;
  const SamplingParams cases[] = {
      {.temperature = 0.7f, .top_p = 0.9f, .seed = 1},
      {.temperature = 1.0f, .min_p = 0.05f, .seed = 2},
      {.temperature = 1.3f, .top_k = 40, .top_p = 0.95f, .seed = 3},
      {.temperature = 0.5f, .top_p = 0.5f, .min_p = 0.01f, .seed = 4},
  };
  for (const auto& params : cases) {
    Sampler s(params);
    auto scores = full_scores(logits);
    for (int i = 0; i < 30; ++i) ASSERT_EQ(s.sample(scores, {}), plain_sample(logits, params, i)) << "draw " << i;
  }
  // Greedy with a penalty: the best after penalising, lowest id among ties.
  std::vector<float> tied = {1.0f, 2.0f, 2.0f, 4.0f};
  Sampler g({.repetition_penalty = 2.0f});
  const int32_t hist[] = {3};
  EXPECT_EQ(g.sample(full_scores(tied), hist), 1);
}

// Issue 14: temperature 1e-40 passed validation, 1/T overflowed to inf, 0*inf
// gave NaN and the sampler picked the least likely token. Below the documented
// floor a temperature means greedy, whatever else is set.
TEST(Sampler, TemperaturesBelowTheFloorAreGreedy) {
  // The shape: a clear best (id 3) among full logits, with the least
  // likely token (id 0) far below.
  std::vector<float> logits(200);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = -2.0f - 0.1f * float(i % 17);
  logits[0] = -36.7f;
  logits[3] = 5.0f;
  const auto scores = full_scores(logits);
  for (float t : {1e-40f, 1e-38f, 1e-30f, 1e-10f, 1e-5f, std::nextafter(kMinSamplingTemperature, 0.0f)}) {
    for (float penalty : {1.0f, 1.3f}) {
      for (int top_k : {0, 5}) {
        SamplingParams p{.temperature = t, .top_k = top_k, .top_p = 0.9f, .min_p = 0.05f,
                         .repetition_penalty = penalty, .seed = 11};
        Sampler s(p);
        EXPECT_TRUE(s.greedy()) << t;
        for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(scores, {}), 3) << "T=" << t << " penalty " << penalty;
      }
    }
  }
  // At the floor it samples (and still nearly always picks the best here).
  Sampler at({.temperature = kMinSamplingTemperature, .seed = 1});
  EXPECT_FALSE(at.greedy());
  EXPECT_TRUE(at.wants().full_logits);
  EXPECT_EQ(at.sample(scores, {}), 3);
}

// Whatever the logits hold (NaN, +-inf, float extremes) and whatever valid
// parameters are set, the sampler returns one of the candidates and never
// picks a NaN or -inf one while a finite one exists.
TEST(Sampler, NoInputProducesNaNOrAnInvalidChoice) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float big = std::numeric_limits<float>::max();
  const std::vector<std::vector<float>> cases = {
      {nan, 1.0f, nan, 0.5f},           // NaN around finite values
      {nan, nan, nan},                  // nothing usable: a tie, the lowest id
      {-inf, -inf, 2.0f, -inf},         // one finite
      {1.0f, inf, 3.0f, inf},           // +inf wins (lowest id among them)
      {-big, big, -big, big * 0.5f},    // differences overflow float
      {-inf, -inf, -inf},
      {0.0f, -0.0f, 1e-45f, -1e-45f},   // near-ties and denormals
  };
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (size_t c = 0; c < cases.size(); ++c) {
    for (int trial = 0; trial < 200; ++trial) {
      SamplingParams p;
      const float temps[] = {0.0f, 1e-40f, 1e-3f, 0.7f, 1.0f, 50.0f, 3e38f};
      p.temperature = temps[trial % 7];
      p.top_k = trial % 3;
      p.top_p = trial % 5 == 0 ? 1e-30f : std::max(1e-6f, u(rng));
      p.min_p = trial % 4 == 0 ? 0.0f : std::min(0.999f, u(rng));
      p.repetition_penalty = trial % 6 == 0 ? 3e38f : (trial % 2 ? 1.0f : 1e-30f);
      p.seed = trial;
      Sampler s(p);
      PositionLogits scores;
      scores.full = cases[c];
      // A backend's top-k list holds the same values; the sampler may get either.
      if (trial % 2) {
        for (size_t i = 0; i < cases[c].size(); ++i) scores.top_k.emplace_back(int32_t(i), cases[c][i]);
        scores.full.clear();
      }
      const int32_t seen[] = {0, 1};
      const int32_t id = s.sample(scores, seen);
      ASSERT_GE(id, 0) << "case " << c << " trial " << trial;
      ASSERT_LT(id, int32_t(cases[c].size())) << "case " << c << " trial " << trial;
      const float chosen = cases[c][id];
      const bool any_finite = std::any_of(cases[c].begin(), cases[c].end(), [](float v) { return std::isfinite(v); });
      const bool any_pos_inf = std::any_of(cases[c].begin(), cases[c].end(), [](float v) { return v == INFINITY; });
      if (any_pos_inf) {
        EXPECT_EQ(chosen, inf) << "case " << c << " trial " << trial;
      } else if (any_finite) {
        EXPECT_TRUE(std::isfinite(chosen)) << "case " << c << " trial " << trial << " picked " << chosen;
      }
      for (const auto& [tid, lp] : Sampler::top_logprobs(scores, 3)) {
        EXPECT_FALSE(std::isnan(lp)) << "case " << c;
        EXPECT_LE(lp, 0.0f) << "case " << c;
      }
    }
  }
}

}  // namespace
}  // namespace qwen3

namespace qwen3 {
namespace {

// A backend that computes distributions (as the BPF one does in the kernel)
// or declines (nullopt: the Sampler's float path).
class DistributionBackend : public Backend {
 public:
  const ModelConfig& config() const override { return cfg_; }
  BackendInfo info() const override { return {}; }
  std::unique_ptr<KvCache> create_kv(int) override { return nullptr; }
  ForwardResult forward(KvCache&, std::span<const int32_t>, const ForwardWants&) override { return {}; }
  std::optional<TokenDistribution> sampling_distribution(const PositionLogits&, const KernelSamplingParams& p,
                                                         std::span<const int32_t> history) override {
    calls++;
    last_history = history.size();
    last_params = p;
    if (!answer) return std::nullopt;
    return TokenDistribution{{{7, 0.25}, {9, 0.75}}};
  }
  ModelConfig cfg_;
  bool answer = true;
  int calls = 0;
  size_t last_history = 0;
  KernelSamplingParams last_params;  // what the Sampler converted
};

TEST(SamplerBackend, TakesTheBackendsDistributionAndDrawsFromIt) {
  DistributionBackend b;
  Sampler s({.temperature = 0.7f, .top_p = 0.9f, .seed = 4}, &b);
  auto scores = full_scores({0.0f, 1.0f, 2.0f});
  const int32_t hist[] = {1, 2};
  const TokenDistribution d = s.distribution(scores, hist);
  EXPECT_EQ(b.calls, 1);
  EXPECT_EQ(b.last_history, 2u);
  const KernelSamplingParams want = kernel_params({.temperature = 0.7f, .top_p = 0.9f, .seed = 4});
  EXPECT_EQ(b.last_params.tm, want.tm);
  EXPECT_EQ(b.last_params.te, want.te);
  EXPECT_EQ(b.last_params.top_p_q32, want.top_p_q32);
  EXPECT_FALSE(b.last_params.greedy);
  ASSERT_EQ(d.tokens.size(), 2u);
  EXPECT_EQ(d.prob_of(9), 0.75);
  std::map<int32_t, int> counts;
  for (int i = 0; i < 2000; ++i) counts[s.sample(scores, hist)]++;
  EXPECT_EQ(counts.size(), 2u);  // only what the backend kept, ids the float path would never pick
  EXPECT_NEAR(counts[9] / 2000.0, 0.75, 0.04);
}

TEST(SamplerBackend, FallsBackToFloatWhenTheBackendDeclinesAndSkipsItForArgmax) {
  DistributionBackend b;
  b.answer = false;
  Sampler s({.temperature = 1.0f, .top_p = 0.8f, .seed = 5}, &b);
  auto scores = full_scores({std::log(0.6f), std::log(0.3f), std::log(0.1f)});
  const TokenDistribution d = s.distribution(scores, {});
  EXPECT_EQ(b.calls, 1);
  EXPECT_NEAR(d.prob_of(0), 2.0 / 3.0, 1e-6);  // the float path's answer
  Sampler greedy({}, &b);
  EXPECT_EQ(greedy.sample(scores, {}), 0);  // the backend's argmax: nothing to compute
  EXPECT_EQ(b.calls, 1);
}

}  // namespace
}  // namespace qwen3
