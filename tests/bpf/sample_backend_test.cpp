// The BPF backend's sampling distribution end to end (fixture test_models):
//   - Sampler(params, &backend).distribution() is qn_sample's result on the
//     forward pass's own scores (== the C++ model, bit for bit) and close to
//     the float Sampler's, for the Qwen3 defaults (kernel top-20), a penalty
//     (full logits), a nucleus over the whole vocabulary, greedy + penalty;
//   - a sampling top-k beyond the kernel's list (64) cut by qn_sample over the
//     whole vocabulary's Q16 logits, not from the list selected in user space;
//   - one bpf() call per distribution, none for plain greedy; Sampler::sample
//     draws in the kernel with one call, the token user space would draw;
//   - sampling in the pass (Sampler::in_pass: qn_sample over the logits row
//     where the pass left them, QN_SAMPLE_LOGITS) picks the token sampling
//     from the copied scores picks, for every candidate kind and draw index,
//     and leaves the scores out when the caller reads only the token;
//   - scores that carry the whole vocabulary are sampled and normalised in
//     place while logits_buf holds them, from their copied values after a
//     later pass (the same results bit for bit), and refused without them;
//   - request threads computing distributions while the engine thread runs
//     forward passes on the same backend get the single-threaded results.
//   - the logprobs the API reports (position_logprobs) come from the kernel's
//     log-normalizer (qn_sample, QN_SAMPLE_LSE): (l_q16 - lse) / 2^16 exactly,
//     one bpf() call, within the derived bound of the float log-softmax; the
//     reference backend declines, so its logprobs are the float ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "../engine/test_backends.h"
#include "common/error.h"
#include "engine/bpf_backend.h"
#include "engine/sampling_kernel.h"
#include "sampling/kernel_params.h"
#include "fixed_sample.h"
#include "sampling/sampler.h"

namespace qwen3 {
namespace {

Backend& backend() { return test_support::bpf_backend("tiny", WeightPath::map, Precision::q24, 8, 256); }

uint64_t calls() { return dynamic_cast<BpfBackendApi&>(backend()).stats().bpf_calls; }

const std::vector<int32_t> kPrompt = {151644, 872, 198, 9707, 11, 1879, 0, 3555, 374, 279, 3974, 315};

PositionLogits scores_for(const Sampler& s) {
  auto kv = backend().create_kv(64);
  ForwardResult r = backend().forward(*kv, kPrompt, s.wants());
  return r.positions.back();
}

double tv(const TokenDistribution& a, const TokenDistribution& b) {
  std::map<int32_t, double> d;
  for (auto& [id, p] : a.tokens) d[id] += p;
  for (auto& [id, p] : b.tokens) d[id] -= p;
  double t = 0;
  for (auto& [id, x] : d) t += std::fabs(x);
  return t / 2;
}

// The model's result on the same scores: the backend's own Q16 logits, the
// whole vocabulary when it reports them.
TokenDistribution model_distribution(const PositionLogits& s, const SamplingParams& p, std::span<const int32_t> hist) {
  std::vector<qn_topk_entry> cand;
  EXPECT_FALSE(s.full_q16.empty() && s.top_k_q16.empty()) << "the BPF backend reports its Q16 logits";
  if (!s.full_q16.empty())
    for (size_t i = 0; i < s.full_q16.size(); i++) cand.push_back({int32_t(i), s.full_q16[i]});
  else
    for (size_t i = 0; i < s.top_k.size(); i++) cand.push_back({s.top_k[i].first, s.top_k_q16.at(i)});
  const uint32_t vocab = uint32_t(backend().config().vocab_size);
  std::vector<uint32_t> seen(qn_sample_seen_words(vocab), 0);
  for (int32_t id : hist) seen[uint32_t(id) >> 5] |= 1u << (id & 31);
  const auto out = fixed::sample_model(engine::sample_hdr(kernel_params(p), uint32_t(cand.size())), cand, seen);
  TokenDistribution d;
  for (auto& e : out.kept) d.tokens.emplace_back(e.id, std::ldexp(double(e.w), -QN_SAMPLE_PFRAC));
  return d;
}

TEST(SampleBackend, KernelDistributionEqualsModelAndIsCloseToFloat) {
  const std::vector<SamplingParams> cases = {
      {.temperature = 0.6f, .top_k = 20, .top_p = 0.95f},                             // Qwen3's defaults
      {.temperature = 1.0f, .top_k = 40, .top_p = 0.9f, .repetition_penalty = 1.3f},   // full logits
      {.temperature = 1.0f, .top_p = 0.9f},                                            // nucleus over the vocabulary
      {.temperature = 0.8f, .min_p = 0.05f},                                           // min-p over the vocabulary
      {.temperature = 0.0f, .repetition_penalty = 1.5f},                               // greedy, penalised
  };
  for (const SamplingParams& p : cases) {
    Sampler kernel(p, &backend());
    Sampler flt(p);
    const PositionLogits s = scores_for(kernel);
    const uint64_t c0 = calls();
    const TokenDistribution k = kernel.distribution(s, kPrompt);
    EXPECT_EQ(calls() - c0, 1u) << "T " << p.temperature;
    const TokenDistribution m = model_distribution(s, p, kPrompt);
    // both in candidate order; compared as maps of id to probability
    std::map<int32_t, double> km(k.tokens.begin(), k.tokens.end()), mm(m.tokens.begin(), m.tokens.end());
    EXPECT_EQ(km, mm) << "T " << p.temperature;
    const TokenDistribution f = flt.distribution(s, kPrompt);
    const double d = tv(k, f);
    std::printf("T %.2f top_k %d top_p %.2f min_p %.2f penalty %.2f: %zu kept, TV to float %.3g\n", p.temperature,
                p.top_k, p.top_p, p.min_p, p.repetition_penalty, k.tokens.size(), d);
    EXPECT_LT(d, 1e-4) << "T " << p.temperature;
  }
}

// A sampling top-k beyond the kernel's list (64): qn_sample reads the whole
// vocabulary's Q16 logits where the pass left them (none copied out) and
// makes the cut (its radix select), bit for bit the model's; the list it
// reports is for reporting only.
TEST(SampleBackend, TopKBeyondTheKernelListIsCutByQnSample) {
  const int vocab = backend().config().vocab_size;
  const std::vector<SamplingParams> cases = {
      {.temperature = 0.8f, .top_k = 100},
      {.temperature = 1.0f, .top_k = 100, .top_p = 0.9f},
      {.temperature = 0.6f, .top_k = 1000, .min_p = 0.01f},
  };
  for (const SamplingParams& p : cases) {
    SCOPED_TRACE("top_k " + std::to_string(p.top_k));
    Sampler kernel(p, &backend());
    // The same prompt's whole vocabulary copied out by a pass that asks for it (the model's input below).
    PositionLogits copied;
    {
      auto kv = backend().create_kv(64);
      copied = backend().forward(*kv, kPrompt, ForwardWants{.full_logits = true, .sample = std::nullopt}).positions.back();
    }
    const PositionLogits s = scores_for(kernel);
    ASSERT_TRUE(s.full_q16.empty());  // the whole vocabulary stayed in the kernel
    ASSERT_TRUE(s.whole_vocab());
    ASSERT_TRUE(s.full.empty());  // not asked for
    ASSERT_EQ(s.top_k.size(), size_t(p.top_k));
    ASSERT_EQ(s.top_k_q16.size(), s.top_k.size());
    for (size_t i = 0; i < s.top_k.size(); i++) {
      ASSERT_EQ(s.top_k_q16[i], copied.full_q16.at(s.top_k[i].first));
      ASSERT_EQ(s.top_k[i].second, float(s.top_k_q16[i]) / 65536.0f);
    }
    uint64_t c0 = calls();
    const TokenDistribution k = kernel.distribution(s, kPrompt);
    EXPECT_EQ(calls() - c0, 1u);  // qn_sample; the float path makes no bpf() call
    const TokenDistribution m = model_distribution(copied, p, kPrompt);
    std::map<int32_t, double> km(k.tokens.begin(), k.tokens.end()), mm(m.tokens.begin(), m.tokens.end());
    EXPECT_EQ(km, mm);
    for (auto& [id, q] : k.tokens)  // Q40 probabilities, as only the kernel computes them
      EXPECT_EQ(std::ldexp(q, QN_SAMPLE_PFRAC), std::floor(std::ldexp(q, QN_SAMPLE_PFRAC)));
    const TokenDistribution f = Sampler(p).distribution(s, kPrompt);  // float, from the reported list
    std::printf("top_k %d top_p %.2f min_p %.2f: %zu kept, TV to float %.3g\n", p.top_k, p.top_p, p.min_p,
                k.tokens.size(), tv(k, f));
    EXPECT_LT(tv(k, f), 1e-4);
    // The cut is the kernel's: a different reported list changes nothing.
    PositionLogits other = s;
    std::reverse(other.top_k.begin(), other.top_k.end());
    std::reverse(other.top_k_q16.begin(), other.top_k_q16.end());
    for (auto& [id, l] : other.top_k) id = (id + 1) % vocab;
    c0 = calls();
    EXPECT_EQ(kernel.distribution(other, kPrompt).tokens, k.tokens);
    EXPECT_EQ(calls() - c0, 1u);
  }
}

// Sampler::sample draws in the kernel: one bpf() call (qn_sample with
// QN_SAMPLE_DRAW) per token, the token draw_token picks in user space from
// the kernel's distribution with the same seed and draw index.
TEST(SampleBackend, SampleDrawsInTheKernelWithOneCall) {
  const SamplingParams p{.temperature = 0.8f, .top_p = 0.9f, .repetition_penalty = 1.2f, .seed = 99};
  Sampler kernel(p, &backend());
  const PositionLogits s = scores_for(kernel);
  const TokenDistribution d = kernel.distribution(s, kPrompt);
  std::map<int32_t, int> seen;
  for (uint64_t i = 0; i < 50; i++) {
    const uint64_t c0 = calls();
    const int32_t t = kernel.sample(s, kPrompt);
    EXPECT_EQ(calls() - c0, 1u);
    ASSERT_EQ(t, draw_token(d, p.seed, i)) << "draw " << i;
    seen[t]++;
  }
  EXPECT_GT(seen.size(), 1u) << "the draws never left one token";
}

TEST(SampleBackend, InPassSamplingPicksWhatTheCopiedScoresPick) {
  struct Case {
    SamplingParams p;
    int logprobs;  // the caller's own ask beyond sampling's (full logits and a top-k list), as Generate's
  };
  const Case cases[] = {
      {{.temperature = 0.8f, .top_p = 0.9f, .repetition_penalty = 1.2f, .seed = 3}, 0},  // whole, penalty
      {{.temperature = 1.0f, .top_p = 0.95f, .seed = 5}, 0},                              // whole, nucleus
      {{.temperature = 0.6f, .top_k = 20, .top_p = 0.95f, .seed = 7}, 0},                 // the kernel's list
      {{.temperature = 1.0f, .top_k = 100, .seed = 11}, 0},                               // beyond the list
      {{.temperature = 0.6f, .top_k = 20, .top_p = 0.95f, .seed = 7}, 5},                 // logprobs: whole
      {{.temperature = 0.0f, .repetition_penalty = 1.3f}, 0},                             // greedy, penalty
  };
  for (const Case& c : cases) {
    Sampler copied(c.p, &backend()), in_pass(c.p, &backend());
    ForwardWants base = copied.wants();
    if (c.logprobs > 0) base.full_logits = true, base.top_k = std::max(base.top_k, c.logprobs);
    for (uint64_t i = 0; i < 3; i++) {
      auto kv = backend().create_kv(64);
      const ForwardResult plain = backend().forward(*kv, kPrompt, base);
      const int32_t want = copied.sample(plain.positions.back(), kPrompt);
      auto kv2 = backend().create_kv(64);
      const ForwardWants w = in_pass.in_pass(base, kPrompt);
      ASSERT_TRUE(w.sample.has_value());
      EXPECT_EQ(w.sample->scores_unused, c.logprobs == 0);
      const PositionLogits got = backend().forward(*kv2, kPrompt, w).positions.back();
      ASSERT_EQ(got.sampled, want) << "top_k " << c.p.top_k << " draw " << i;
      EXPECT_EQ(got.sampled_draw, i);
      EXPECT_EQ(got.full_q16.empty(), c.logprobs == 0);  // the 151,936 logits stayed in the kernel
      const uint64_t c0 = calls();
      EXPECT_EQ(in_pass.sample(got, kPrompt), want);
      EXPECT_EQ(calls(), c0);  // drawn already
    }
  }
}

// Scores that carry the whole vocabulary are sampled, drawn and normalised
// where the pass left their logits while logits_buf still holds them (no
// candidate written into sample_buf from user space), and from their copied
// Q16 values once a later pass overwrote the row: the same distribution,
// token and log-normalizer bit for bit. Without copied values such scores
// are refused after a later pass, never read stale.
TEST(SampleBackend, InPlaceIsTheCopiedPathBitForBit) {
  const SamplingParams cases[] = {
      {.temperature = 0.8f, .top_p = 0.9f, .repetition_penalty = 1.2f, .seed = 3},  // penalty
      {.temperature = 1.0f, .top_p = 0.95f, .seed = 5},                              // nucleus
      {.temperature = 1.0f, .top_k = 100, .seed = 11},                               // beyond the kernel's list
  };
  for (const SamplingParams& p : cases) {
    SCOPED_TRACE("top_k " + std::to_string(p.top_k) + " top_p " + std::to_string(p.top_p));
    Sampler sampler(p, &backend());
    ForwardWants w = sampler.wants();
    w.full_logits = true;  // the values too, as logprobs ask: the copying path's input
    auto kv = backend().create_kv(64);
    const PositionLogits s = backend().forward(*kv, kPrompt, w).positions.back();
    ASSERT_NE(s.logits_pass, 0u);
    ASSERT_EQ(s.full_q16.size(), size_t(backend().config().vocab_size));
    const uint64_t l0 = engine::whole_vocab_loads();
    const TokenDistribution d_in = sampler.distribution(s, kPrompt);
    const int32_t t_in = sampler.peek_sample(s, kPrompt, 4);
    const std::optional<int64_t> lse_in = backend().log_normalizer_q16(s);
    EXPECT_EQ(engine::whole_vocab_loads(), l0) << "the logits went through user space";
    // A later pass overwrites the row: the copied values are read instead.
    const PositionLogits later = scores_for(sampler);
    const TokenDistribution d_copy = sampler.distribution(s, kPrompt);
    const int32_t t_copy = sampler.peek_sample(s, kPrompt, 4);
    const std::optional<int64_t> lse_copy = backend().log_normalizer_q16(s);
    EXPECT_EQ(engine::whole_vocab_loads(), l0 + 3);
    EXPECT_EQ(d_in.tokens, d_copy.tokens);
    EXPECT_EQ(t_in, t_copy);
    ASSERT_TRUE(lse_in.has_value());
    EXPECT_EQ(lse_in, lse_copy);
    // Scores without the values are the latest pass's or nothing.
    PositionLogits bare = later;
    bare.full.clear();
    bare.full_q16.clear();
    if (!bare.whole_vocab()) continue;  // the kernel's top-k list: not the whole vocabulary
    EXPECT_EQ(sampler.distribution(bare, kPrompt).tokens, d_in.tokens);
    (void)scores_for(sampler);
    EXPECT_THROW(sampler.distribution(bare, kPrompt), Error);
    EXPECT_THROW(backend().log_normalizer_q16(bare), Error);
  }
}

TEST(SampleBackend, PlainGreedyNeedsNoCall) {
  Sampler g({}, &backend());
  const PositionLogits s = scores_for(g);
  const uint64_t c0 = calls();
  const TokenDistribution d = g.distribution(s, kPrompt);
  EXPECT_EQ(calls(), c0);
  ASSERT_EQ(d.tokens.size(), 1u);
  EXPECT_EQ(d.tokens[0].first, s.argmax);
}

TEST(SampleBackend, RequestThreadsSampleWhileTheEngineRunsPasses) {
  const std::vector<SamplingParams> params = {{.temperature = 0.6f, .top_k = 20, .top_p = 0.95f},
                                              {.temperature = 1.0f, .top_p = 0.9f, .repetition_penalty = 1.2f},
                                              {.temperature = 0.7f, .min_p = 0.1f}};
  std::vector<PositionLogits> scores;
  std::vector<TokenDistribution> want;
  for (const auto& p : params) {
    Sampler s(p, &backend());
    scores.push_back(scores_for(s));
    want.push_back(s.distribution(scores.back(), kPrompt));
  }
  std::atomic<bool> stop{false};
  std::atomic<int> passes{0};
  std::thread engine([&] {
    auto kv = backend().create_kv(200);
    std::mt19937_64 rng(1);
    while (!stop && kv->positions() + 4 < kv->max_context()) {
      std::vector<int32_t> t = {int32_t(rng() % 1000), int32_t(rng() % 1000)};
      backend().forward(*kv, t, {.full_logits = true, .sample = std::nullopt});
      passes++;
    }
  });
  std::vector<std::thread> requests;
  std::atomic<int> mismatches{0};
  for (size_t r = 0; r < params.size(); r++)
    requests.emplace_back([&, r] {
      Sampler s(params[r], &backend());
      for (int i = 0; i < 40; i++) {
        const TokenDistribution d = s.distribution(scores[r], kPrompt);
        if (d.tokens != want[r].tokens) mismatches++;
      }
    });
  for (auto& t : requests) t.join();
  stop = true;
  engine.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GT(passes.load(), 0);
}

// The bound of tests/bpf/sample_test.cpp (SampleLse; docs/numerics.md,
// "Logprobs in BPF"): the Q16 rounding of lse, the weights' relative error
// (kWeightRel there) and half a Q44 unit per candidate, the logarithm's
// truncations.
double lse_bound(size_t n) {
  const double w = 3 * std::ldexp(1, -30) + std::ldexp(1, -31) + std::ldexp(1, -33) +
                   46 * std::log(2.0) * std::ldexp(1, -31) + std::log(2.0) * std::ldexp(1, -32);
  const double x = w + double(n) * std::ldexp(1, -45);
  return std::ldexp(1, -17) + x / (1 - x) + std::ldexp(1, -40);
}

TEST(SampleBackend, LogprobsAreTheKernelsNormalizer) {
  const int vocab = backend().config().vocab_size;
  // What Generate asks for with logprobs (the whole vocabulary), and a top-k list alone.
  for (const ForwardWants& w : {ForwardWants{.top_k = 5, .full_logits = true, .sample = std::nullopt},
                                ForwardWants{.top_k = 20, .sample = std::nullopt}}) {
    SCOPED_TRACE(w.full_logits ? "full logits" : "top-k list");
    auto kv = backend().create_kv(64);
    const PositionLogits s = backend().forward(*kv, kPrompt, w).positions.back();
    const bool whole = w.full_logits;
    ASSERT_EQ(s.full_q16.size(), whole ? size_t(vocab) : 0u);
    std::vector<qn_topk_entry> cand;
    if (whole)
      for (int i = 0; i < vocab; i++) cand.push_back({i, s.full_q16[i]});
    else
      for (size_t i = 0; i < s.top_k.size(); i++) cand.push_back({s.top_k[i].first, s.top_k_q16[i]});
    const uint64_t c0 = calls();
    const auto t0 = std::chrono::steady_clock::now();
    const PositionLogprobs k = position_logprobs(s, 5, &backend(), s.argmax);
    const auto t1 = std::chrono::steady_clock::now();
    EXPECT_EQ(calls() - c0, 1u);  // one qn_sample call (QN_SAMPLE_LSE)
    ASSERT_TRUE(k.kernel);
    const std::optional<int64_t> lse = backend().log_normalizer_q16(s);
    ASSERT_TRUE(lse.has_value());
    EXPECT_EQ(*lse, fixed::lse_model(cand));
    const auto t2 = std::chrono::steady_clock::now();
    const PositionLogprobs f = position_logprobs(s, 5, nullptr, s.argmax);  // float
    const auto t3 = std::chrono::steady_clock::now();
    std::printf("%zu candidates: position_logprobs %.0f us with the kernel's normalizer, %.0f us in float (one run, wall)\n",
                cand.size(), std::chrono::duration<double, std::micro>(t1 - t0).count(),
                std::chrono::duration<double, std::micro>(t3 - t2).count());
    ASSERT_FALSE(f.kernel);
    ASSERT_EQ(k.top.size(), 5u);
    ASSERT_EQ(f.top.size(), 5u);
    double worst = 0;
    for (size_t r = 0; r < 5; r++) {
      const int32_t id = k.top[r].id;
      int32_t q = 0;
      for (const auto& c : cand)
        if (c.id == id) q = c.logit;
      EXPECT_EQ(k.top[r].logprob, float(double(int64_t(q) - *lse) / 65536.0)) << r;
      EXPECT_EQ(id, f.top[r].id) << r;
      const double e = std::fabs(double(k.top[r].logprob) - double(f.top[r].logprob));
      EXPECT_LE(e, lse_bound(cand.size()) + 2 * std::fabs(double(f.top[r].logprob)) * std::ldexp(1, -24)) << r;
      worst = std::max(worst, e);
    }
    EXPECT_EQ(k.top[0].id, s.argmax);
    ASSERT_TRUE(k.chosen.has_value());
    EXPECT_EQ(*k.chosen, k.top[0].logprob);
    std::printf("%s: lse %.6f, top logprob %.6f, max |kernel - float| %.3g nats (bound %.3g)\n",
                whole ? "full logits" : "top-20 list", double(*lse) / 65536.0, double(k.top[0].logprob), worst,
                lse_bound(cand.size()));
    // The reference backend leaves it to the float path.
    Backend& ref = test_support::reference_backend("tiny");
    EXPECT_FALSE(ref.log_normalizer_q16(s).has_value());
    const PositionLogprobs r = position_logprobs(s, 5, &ref, s.argmax);
    EXPECT_FALSE(r.kernel);
    for (size_t i = 0; i < 5; i++) EXPECT_EQ(r.top[i].logprob, f.top[i].logprob);
  }
}

}  // namespace
}  // namespace qwen3
