// The kernel driver (bpf_ops/ops_drive.h, docs/kernel-driver.md): after one
// submission the kernel feeds the prompt, chooses every token and stops on
// its own. It must give token for token the ids of the user driver (the
// backend's forward + the Sampler, as run_generate decodes) on the tiny
// generated model and the shipped trained model, greedy and seeded sampling
// over each kind of candidates (the argmax, the top-k list, the whole
// vocabulary, with a repetition penalty), stop at a stop id, end within one
// token when cancelled, leave the cache as the user driver does, and make at
// most one bpf() call per decoded token.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "sampling/sampler.h"
#include "test_backends.h"

namespace qwen3 {
namespace {

using test_support::open_model;

// One backend with the kernel driver per model and precision (two worker slots).
BpfBackendApi& kbackend(const std::string& model, Precision precision = Precision::q8) {
  static std::map<std::pair<std::string, Precision>, std::unique_ptr<Backend>> cache;
  auto& b = cache[{model, precision}];
  if (!b) {
    BpfEngineOptions o;
    o.precision = precision;
    o.threads = 2;
    o.max_context = 512;
    o.kernel_driver = true;
    b = make_bpf_backend(open_model(model), o);
  }
  return dynamic_cast<BpfBackendApi&>(*b);
}

struct Decoded {
  std::vector<int32_t> tokens;
  int positions = 0;
};

// The user driver: prefill, sample, then a forward step per token, as run_generate.
Decoded user_decode(Backend& b, const std::vector<int32_t>& prompt, int n, const SamplingParams& sp,
                    const std::vector<int32_t>& stops = {}) {
  Sampler sampler(sp, &b);
  const ForwardWants wants = sampler.wants();
  auto kv = b.create_kv(static_cast<int>(prompt.size()) + n + 1);
  std::vector<int32_t> history = prompt;
  Decoded d;
  ForwardResult r = b.forward(*kv, prompt, sampler.in_pass(wants, history));  // sampled in the pass
  for (;;) {
    const int32_t id = sampler.sample(r.positions.back(), history);
    history.push_back(id);
    d.tokens.push_back(id);
    if (std::find(stops.begin(), stops.end(), id) != stops.end() || static_cast<int>(d.tokens.size()) >= n) break;
    r = b.forward(*kv, std::span<const int32_t>(&history.back(), 1), sampler.in_pass(wants, history));
  }
  d.positions = kv->positions();
  return d;
}

struct KernelRun {
  Decoded d;
  KernelGenerateResult res;
  uint64_t calls = 0;
};

KernelRun kernel_decode(BpfBackendApi& b, const std::vector<int32_t>& prompt, int n, const SamplingParams& sp,
                        const std::vector<int32_t>& stops = {}, int cancel_after = 0) {
  Sampler sampler(sp, &b);
  KernelGenerateRequest req;
  req.feed = prompt;
  req.history = prompt;
  req.params = kernel_params(sp);
  req.wants = sampler.wants();
  req.max_tokens = n;
  req.stop_ids = stops;
  auto kv = b.create_kv(static_cast<int>(prompt.size()) + n + 1);
  KernelRun k;
  std::vector<int32_t> streamed;
  const uint64_t c0 = b.stats().bpf_calls;
  auto res = b.generate_in_kernel(*kv, req, [&](int32_t id, int index) {
    EXPECT_EQ(index, static_cast<int>(streamed.size()));
    streamed.push_back(id);
    return cancel_after == 0 || static_cast<int>(streamed.size()) < cancel_after;
  });
  k.calls = b.stats().bpf_calls - c0;
  if (!res) {
    ADD_FAILURE() << "the kernel driver declined the request";
    return k;
  }
  k.res = *res;
  k.d.tokens = res->tokens;
  k.d.positions = kv->positions();
  EXPECT_EQ(streamed, res->tokens);
  return k;
}

std::vector<int32_t> prompt_for(const Backend& b, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return test_support::random_prompt(rng, n, b.config().vocab_size);
}

struct Case {
  const char* name;
  SamplingParams sp;
};

std::vector<Case> cases() {
  SamplingParams greedy;
  SamplingParams list;  // the top-k list (k <= 64)
  list.temperature = 0.9f, list.top_k = 20, list.top_p = 0.95f, list.seed = 7;
  SamplingParams whole;  // the whole vocabulary (nucleus)
  whole.temperature = 1.1f, whole.top_p = 0.9f, whole.min_p = 0.01f, whole.seed = 11;
  SamplingParams penalty;  // greedy with a penalty: the whole vocabulary, the history's bitmap
  penalty.repetition_penalty = 1.3f;
  SamplingParams wide;  // top_k beyond the kernel's list, with a penalty
  wide.temperature = 0.8f, wide.top_k = 100, wide.repetition_penalty = 1.1f, wide.seed = 3;
  return {{"greedy", greedy}, {"list", list}, {"whole", whole}, {"penalty", penalty}, {"wide", wide}};
}

void same_tokens(const std::string& model, int prompt_len, int n, Precision precision = Precision::q8) {
  BpfBackendApi& b = kbackend(model, precision);
  const auto prompt = prompt_for(b, prompt_len, 42);
  std::set<std::vector<int32_t>> distinct;  // the cases choose differently: the params reach the kernel
  for (const Case& c : cases()) {
    SCOPED_TRACE(model + " " + c.name);
    const Decoded u = user_decode(b, prompt, n, c.sp);
    const KernelRun k = kernel_decode(b, prompt, n, c.sp);
    EXPECT_EQ(k.d.tokens, u.tokens);
    EXPECT_EQ(k.d.positions, u.positions);
    EXPECT_EQ(k.res.finish, KernelFinish::length);
    distinct.insert(k.d.tokens);
  }
  EXPECT_GE(distinct.size(), 3u);
}

TEST(KernelDriver, TinySameTokensAsUserDriver) { same_tokens("tiny", 37, 24); }
TEST(KernelDriver, TrainedSameTokensAsUserDriver) { same_tokens("trained", 21, 24); }
// q4: its 4-bit ops run in their own family of links (QN_FAM_MM4)
TEST(KernelDriver, TrainedQ4SameTokensAsUserDriver) { same_tokens("trained", 21, 24, Precision::q4); }

TEST(KernelDriver, AtMostOneBpfCallPerDecodedToken) {
  BpfBackendApi& b = kbackend("tiny");
  const auto prompt = prompt_for(b, 19, 5);
  const KernelRun k = kernel_decode(b, prompt, 64, SamplingParams{});
  ASSERT_EQ(k.d.tokens.size(), 64u);
  EXPECT_LE(double(k.calls) / 64.0, 1.0) << k.calls << " bpf() calls for 64 tokens";
  // One link per operator share: the chain ran every one of them, and none for long.
  EXPECT_GT(k.res.links, 64u * 10);
  EXPECT_LT(k.res.max_link_ms, 1000.0);
  // Every share was run by exactly one of the chains (the second CPU's takes what it gets to).
  uint64_t shares = 0;
  for (uint64_t n : k.res.chain_links) shares += n;
  EXPECT_EQ(shares, k.res.links);
  EXPECT_LE(k.calls, 2u);  // the submission, and the second chain's join
}

TEST(KernelDriver, StopsAtAStopIdInTheKernel) {
  BpfBackendApi& b = kbackend("tiny");
  const auto prompt = prompt_for(b, 9, 8);
  const Decoded free_run = user_decode(b, prompt, 16, SamplingParams{});
  const int32_t stop = free_run.tokens[5];
  const Decoded u = user_decode(b, prompt, 16, SamplingParams{}, {stop});
  const KernelRun k = kernel_decode(b, prompt, 16, SamplingParams{}, {stop});
  EXPECT_EQ(k.d.tokens, u.tokens);
  EXPECT_EQ(k.d.tokens.back(), stop);
  EXPECT_EQ(k.res.finish, KernelFinish::stop);
  EXPECT_EQ(k.d.positions, u.positions);
}

TEST(KernelDriver, CancelEndsWithinOneToken) {
  BpfBackendApi& b = kbackend("tiny");
  const auto prompt = prompt_for(b, 9, 9);
  const KernelRun k = kernel_decode(b, prompt, 40, SamplingParams{}, {}, 3);
  EXPECT_EQ(k.res.finish, KernelFinish::cancelled);
  EXPECT_EQ(k.d.tokens.size(), 3u);
  EXPECT_EQ(k.d.positions, static_cast<int>(prompt.size() + k.d.tokens.size()) - 1);
  // The engine is free again: a plain forward and another generation run.
  const Decoded u = user_decode(b, prompt, 5, SamplingParams{});
  EXPECT_EQ(kernel_decode(b, prompt, 5, SamplingParams{}).d.tokens, u.tokens);
}

}  // namespace
}  // namespace qwen3
