// Kernel-driven generations through the scheduler (Scheduler::generate_in_kernel):
// turns give the tokens of one long generation, sessions take turns, user-driven
// steps run between turns, stops and cancellation end within a token. A fake
// backend stands for the kernel driver.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "fake_backend.h"
#include "scheduler/scheduler.h"

namespace qwen3 {
namespace {

using testing::FakeBackend;
using testing::FakeKv;

// A kernel driver in the small: a token depends on the cache's tokens, the
// draw index and the penalty history's length, so a turn that does not
// continue all three gives other tokens than one long generation.
class KernelFake : public FakeBackend {
 public:
  std::chrono::milliseconds token_delay{0};
  std::atomic<int> submissions{0};

  static int32_t choose(const std::vector<int32_t>& cached, uint64_t draw, size_t history) {
    return static_cast<int32_t>((next_of(cached) + 7 * draw + history) % 100);
  }
  std::optional<KernelGenerateResult> generate_in_kernel(KvCache& kv, const KernelGenerateRequest& req,
                                                         const std::function<bool(int32_t, int)>& on_token) override {
    if (declines) return std::nullopt;
    ++submissions;
    auto& fk = static_cast<FakeKv&>(kv);
    if (fk.positions() + static_cast<int>(req.feed.size()) > fk.max_context()) throw invalid_argument("context overflow");
    fk.tokens.insert(fk.tokens.end(), req.feed.begin(), req.feed.end());
    KernelGenerateResult r;
    for (int i = 0;; ++i) {
      if (token_delay.count() > 0) std::this_thread::sleep_for(token_delay);
      const int32_t id = choose(fk.tokens, req.draw0 + i, req.history.size() + i);
      r.tokens.push_back(id);
      if (!on_token(id, i)) {
        r.finish = KernelFinish::cancelled;
        break;
      }
      if (std::find(req.stop_ids.begin(), req.stop_ids.end(), id) != req.stop_ids.end()) {
        r.finish = KernelFinish::stop;
        break;
      }
      if (i + 1 == req.max_tokens || fk.positions() >= fk.max_context()) break;  // length
      fk.tokens.push_back(id);  // fed: the cache holds all but the last chosen
    }
    return r;
  }
  bool declines = false;
};

KernelGenerateRequest request(const std::vector<int32_t>& prompt, int max_tokens) {
  KernelGenerateRequest req;
  req.feed = prompt;
  req.history = prompt;
  req.max_tokens = max_tokens;
  return req;
}

SchedulerOptions short_turns() {
  SchedulerOptions o;
  o.kernel_turn = std::chrono::milliseconds(3);  // a few tokens of token_delay while others wait
  return o;
}

TEST(KernelTurns, GiveTheTokensOfOneLongGeneration) {
  KernelFake backend;
  backend.token_delay = std::chrono::milliseconds(1);
  const std::vector<int32_t> prompt = {4, 9, 2};
  auto alone = backend.create_kv(64);
  const auto one = backend.generate_in_kernel(*alone, request(prompt, 30), [](int32_t, int) { return true; });
  ASSERT_TRUE(one);
  Scheduler sched(backend, short_turns());
  auto kv = backend.create_kv(64);
  std::vector<int32_t> seen;
  const auto r = sched.generate_in_kernel(*kv, request(prompt, 30), [&](int32_t id, int index) {
    EXPECT_EQ(index, static_cast<int>(seen.size()));
    seen.push_back(id);
    return true;
  });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->tokens, one->tokens);
  EXPECT_EQ(seen, one->tokens);
  EXPECT_EQ(r->finish, KernelFinish::length);
  EXPECT_EQ(static_cast<FakeKv&>(*kv).tokens, static_cast<FakeKv&>(*alone).tokens);
  EXPECT_EQ(sched.stats().kernel_turns, 1u) << "alone, a generation is one submission";
  EXPECT_EQ(sched.stats().kernel_tokens, 30u);

  // The context's end stops it at the same token as one generation does.
  auto small_alone = backend.create_kv(12), small = backend.create_kv(12);
  const auto end1 = backend.generate_in_kernel(*small_alone, request(prompt, 30), [](int32_t, int) { return true; });
  const auto end2 = sched.generate_in_kernel(*small, request(prompt, 30), [](int32_t, int) { return true; });
  ASSERT_TRUE(end1 && end2);
  EXPECT_EQ(end2->tokens, end1->tokens);
  EXPECT_EQ(small->positions(), small_alone->positions());
}

TEST(KernelTurns, SessionsTakeTurnsAndUserStepsRunBetween) {
  KernelFake backend;
  backend.token_delay = std::chrono::milliseconds(1);
  Scheduler sched(backend, short_turns());
  constexpr int kSessions = 3, kTokens = 24;
  std::mutex mu;
  std::vector<int> order;  // the session of each token, as they came
  std::vector<std::vector<int32_t>> got(kSessions);
  std::vector<std::thread> threads;
  for (int c = 0; c < kSessions; ++c)
    threads.emplace_back([&, c] {
      auto kv = backend.create_kv(64);
      const std::vector<int32_t> prompt = {c + 1, 5};
      auto r = sched.generate_in_kernel(*kv, request(prompt, kTokens), [&](int32_t, int) {
        std::lock_guard lock(mu);
        order.push_back(c);
        return true;
      });
      ASSERT_TRUE(r);
      got[c] = r->tokens;
    });
  // A user-driven decoding session meanwhile gets its steps.
  auto ukv = backend.create_kv(64);
  int user_steps = 0;
  for (int i = 0; i < 10; ++i) {
    const int32_t t[1] = {3};
    sched.run(*ukv, t, {});
    ++user_steps;
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(user_steps, 10);
  EXPECT_GT(sched.stats().kernel_turns, size_t(kSessions)) << "the generations were not cut into turns";
  for (int c = 0; c < kSessions; ++c) {
    auto kv = backend.create_kv(64);
    const std::vector<int32_t> prompt = {c + 1, 5};
    EXPECT_EQ(got[c], backend.generate_in_kernel(*kv, request(prompt, kTokens), [](int32_t, int) { return true; })->tokens);
  }
  // Taking turns: every session had tokens before any finished.
  ASSERT_EQ(order.size(), size_t(kSessions * kTokens));
  std::vector<int> first(kSessions, -1), last(kSessions, -1);
  for (size_t i = 0; i < order.size(); ++i) {
    if (first[order[i]] < 0) first[order[i]] = static_cast<int>(i);
    last[order[i]] = static_cast<int>(i);
  }
  for (int a = 0; a < kSessions; ++a)
    for (int b = 0; b < kSessions; ++b) EXPECT_LT(first[a], last[b]) << "session " << a << " waited for " << b;
}

TEST(KernelTurns, StopsCancelsLongFeedsAndDeclines) {
  KernelFake backend;
  backend.token_delay = std::chrono::milliseconds(1);  // turns of a few tokens
  SchedulerOptions o = short_turns();
  o.prefill_chunk = 4;
  Scheduler sched(backend, o);
  const std::vector<int32_t> prompt = {1, 2, 3};
  // on_token says stop at the 5th token: nothing past it, the cache holds all but it.
  auto kv = backend.create_kv(64);
  int calls = 0;
  auto r = sched.generate_in_kernel(*kv, request(prompt, 40), [&](int32_t, int) { return ++calls < 5; });
  ASSERT_TRUE(r);
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(r->tokens.size(), 5u);
  EXPECT_EQ(r->finish, KernelFinish::cancelled);
  EXPECT_EQ(kv->positions(), 3 + 5 - 1);
  // A stop id ends it as a stop.
  auto kv2 = backend.create_kv(64);
  auto req = request(prompt, 40);
  req.stop_ids = {r->tokens[3]};
  r = sched.generate_in_kernel(*kv2, req, [](int32_t, int) { return true; });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->finish, KernelFinish::stop);
  EXPECT_EQ(r->tokens.back(), req.stop_ids[0]);
  // Cancelled (polled between turns).
  auto kv3 = backend.create_kv(64);
  std::atomic<int> polls{0};
  r = sched.generate_in_kernel(*kv3, request(prompt, 40), [](int32_t, int) { return true; }, [&] { return ++polls > 3; });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->finish, KernelFinish::cancelled);
  EXPECT_LT(r->tokens.size(), 40u);
  // A feed longer than a prefill chunk: its head as a user-driven prefill, the same tokens.
  const std::vector<int32_t> longer = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto a = backend.create_kv(64), b = backend.create_kv(64);
  const auto one = backend.generate_in_kernel(*a, request(longer, 6), [](int32_t, int) { return true; });
  const size_t steps_before = sched.stats().steps;
  r = sched.generate_in_kernel(*b, request(longer, 6), [](int32_t, int) { return true; });
  ASSERT_TRUE(r && one);
  EXPECT_EQ(r->tokens, one->tokens);
  EXPECT_GT(sched.stats().steps, steps_before);
  // Declined: nullopt and the cache as before (the head's prefill undone).
  backend.declines = true;
  auto c = backend.create_kv(64);
  EXPECT_FALSE(sched.generate_in_kernel(*c, request(longer, 6), [](int32_t, int) { return true; }));
  EXPECT_EQ(c->positions(), 0);
}

}  // namespace
}  // namespace qwen3
