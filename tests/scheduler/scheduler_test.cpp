// The batching scheduler: chunked prefill, shared steps, fairness, pacing, cancellation, over a fake backend.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/error.h"
#include "scheduler/scheduler.h"
#include "sessions/session_manager.h"
#include "fake_backend.h"

namespace qwen3 {
namespace {

using testing::FakeBackend;

// ------------------------------------------------------------- scheduler

TEST(Scheduler, ChunkedPrefillReportsEveryPositionInOrder) {
  FakeBackend backend;
  SchedulerOptions o;
  o.prefill_chunk = 3;
  Scheduler sched(backend, o);
  auto kv = backend.create_kv(32);
  std::vector<int32_t> tokens = {5, 6, 7, 8, 9, 10, 11};
  ForwardWants w;
  w.all_positions = true;
  const auto r = sched.run(*kv, tokens, w);
  ASSERT_EQ(r.positions.size(), tokens.size());
  std::vector<int32_t> seen;
  for (size_t i = 0; i < tokens.size(); ++i) {
    seen.push_back(tokens[i]);
    EXPECT_EQ(r.positions[i].argmax, FakeBackend::next_of(seen)) << "position " << i;
  }
  EXPECT_EQ(kv->positions(), 7);
  EXPECT_EQ(sched.stats().steps, 3u);  // 3 + 3 + 1
}

// A draft's draws in the pass (ForwardWants::sample with all_positions)
// start at its first fed position: a pass that holds the whole job keeps
// them, the chunks of a split one carry none (the caller's Sampler draws).
TEST(Scheduler, DraftDrawsInThePassOnlyFromTheFirstPosition) {
  struct Recording : FakeBackend {
    std::vector<bool> sampled;  // per item stepped: whether its wants drew in the pass
    void forward_batch(std::span<BatchItem> items) override {
      for (const BatchItem& it : items) sampled.push_back(it.wants.sample.has_value());
      FakeBackend::forward_batch(items);
    }
  };
  const std::vector<int32_t> history = {4, 5};
  ForwardWants w;
  w.all_positions = true;
  w.sample = PassSampling{.history = history};
  const std::vector<int32_t> tokens = {5, 6, 7, 8, 9};
  for (const int chunk : {8, 2}) {
    Recording backend;
    SchedulerOptions o;
    o.prefill_chunk = chunk;
    Scheduler sched(backend, o);
    auto kv = backend.create_kv(32);
    EXPECT_EQ(sched.run(*kv, tokens, w).positions.size(), tokens.size());
    const std::vector<bool> want = chunk == 8 ? std::vector<bool>{true} : std::vector<bool>{false, false, false};
    EXPECT_EQ(backend.sampled, want) << "prefill_chunk " << chunk;
  }
}

TEST(Scheduler, ConcurrentSequencesShareSteps) {
  FakeBackend backend;
  backend.step_delay = std::chrono::milliseconds(5);
  SchedulerOptions o;
  o.gather_wait = std::chrono::microseconds(5000);
  Scheduler sched(backend, o);
  constexpr int kClients = 4, kSteps = 20;
  std::vector<std::thread> threads;
  std::vector<std::vector<int32_t>> outputs(kClients);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto kv = backend.create_kv(64);
      std::vector<int32_t> seq = {c + 1};
      for (int i = 0; i < kSteps; ++i) {
        const int32_t feed[1] = {seq.back()};
        const auto r = sched.run(*kv, feed, {});
        seq.push_back(r.positions.back().argmax);
      }
      outputs[c] = seq;
    });
  }
  for (auto& t : threads) t.join();
  for (int c = 0; c < kClients; ++c) {
    // Same as computing alone: each step continues its own sequence.
    std::vector<int32_t> expect = {c + 1};
    std::vector<int32_t> fed;
    for (int i = 0; i < kSteps; ++i) {
      fed.push_back(expect.back());
      expect.push_back(FakeBackend::next_of(fed));
    }
    EXPECT_EQ(outputs[c], expect);
  }
  int biggest = 0;
  for (int s : backend.batch_sizes) biggest = std::max(biggest, s);
  EXPECT_GE(biggest, 2) << "steps of different sessions were never batched together";
  EXPECT_LT(backend.batch_sizes.size(), static_cast<size_t>(kClients * kSteps));
}

// Prefills `prefill_tokens` into long_kv on a thread and, once `started`
// positions are in, decodes `decodes` single tokens into short_kv. Returns how
// many decodes finished while the prefill still ran.
int decodes_during_prefill(Scheduler& sched, KvCache& long_kv, KvCache& short_kv, int prefill_tokens,
                           const ForwardWants& wants, int started, int decodes) {
  std::atomic<bool> prefill_done{false};
  std::thread prefill([&] {
    std::vector<int32_t> tokens(prefill_tokens, 7);
    EXPECT_EQ(sched.run(long_kv, tokens, wants).positions.size(), wants.all_positions ? size_t(prefill_tokens) : 1u);
    prefill_done = true;
  });
  while (long_kv.positions() < started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  int during = 0;
  for (int i = 0; i < decodes; ++i) {
    const int32_t t[1] = {3};
    sched.run(short_kv, t, {});
    if (!prefill_done) ++during;
  }
  prefill.join();
  EXPECT_EQ(long_kv.positions(), prefill_tokens);
  return during;
}

TEST(Scheduler, LongPrefillDoesNotStallADecodingSession) {
  FakeBackend backend;
  backend.step_delay = std::chrono::milliseconds(2);
  SchedulerOptions o;
  o.prefill_chunk = 8;
  o.max_batch_tokens = 16;
  Scheduler sched(backend, o);
  auto long_kv = backend.create_kv(512);
  auto short_kv = backend.create_kv(64);
  const int during = decodes_during_prefill(sched, *long_kv, *short_kv, 400, {}, 8, 10);  // 50 chunks
  EXPECT_EQ(short_kv->positions(), 10);
  // The decode steps rode along with the prefill chunks instead of waiting for all 50.
  EXPECT_GE(during, 8);
}

// Issue 14: an 8,000-token Forward with all positions made a concurrent
// 32-token Generate take 18.6 s instead of 0.4 s: every step carried a full
// prefill chunk, each position with its vocabulary projection. While a decode
// waits, a long prefill gets half the decode's cost per step: one token every
// other step or so here (one all-positions token costs about a decode step).
// Alone, its steps stay bounded too: an all-positions chunk costs at most
// kMaxStepDecodes decode steps (plain chunks run whole).
TEST(Scheduler, LongPrefillIsPacedWhileADecodeWaits) {
  FakeBackend backend;
  // The tiny test model's shape: the 151936-row vocabulary projection dominates.
  backend.config_.hidden_size = 64;
  backend.config_.num_hidden_layers = 2;
  backend.config_.num_attention_heads = 4;
  backend.config_.num_key_value_heads = 2;
  backend.config_.head_dim = 32;
  backend.config_.intermediate_size = 192;
  backend.config_.vocab_size = 151936;
  backend.step_delay = std::chrono::milliseconds(1);
  SchedulerOptions o;
  o.prefill_chunk = 16;
  o.max_batch_tokens = 64;
  Scheduler sched(backend, o);
  auto long_kv = backend.create_kv(2048);
  auto short_kv = backend.create_kv(64);
  ForwardWants all;
  all.all_positions = true;
  const int during = decodes_during_prefill(sched, *long_kv, *short_kv, 1200, all, 64, 20);
  EXPECT_EQ(during, 20) << "the test needs the decodes to run while the prefill does";
  int decodes = 0, mixed = 0, alone = 0, beside = 0;  // beside: long tokens from the first decode to the last
  for (const auto& b : backend.batches) {
    bool has_decode = false;
    int long_tokens = 0;
    for (const auto& [kv, n] : b) {
      if (kv == short_kv.get()) has_decode = true;
      if (kv == long_kv.get()) long_tokens = n;
    }
    if (decodes > 0 && decodes < 20) beside += long_tokens;
    if (has_decode) {
      ++decodes;
      if (long_tokens > 0) ++mixed;
      EXPECT_LE(long_tokens, 1) << "a long all-positions prefill chunk rode along with a decode";
    } else if (long_tokens > 0) {
      EXPECT_LE(long_tokens, 3) << "an all-positions chunk alone costs at most 4 decode steps here";
      alone += long_tokens == 3;  // (1-token chunks: paced just after a decode)
    }
  }
  EXPECT_EQ(decodes, 20);
  EXPECT_GE(beside, 5) << "the prefill must still advance while the decodes run";
  EXPECT_LE(mixed, 12) << "the prefill took more than its share beside the decodes (half their cost)";
  EXPECT_GE(alone, 4);
  // The model behind the cut: a chunk of n all-positions tokens costs about n
  // decode steps; n tokens of a plain prefill much less (one projection).
  const auto cost = StepCostModel::of(backend.config_);
  const double decode = cost.cost(1, 0, false);
  EXPECT_EQ(cost.fair_chunk(16, 100, true, 0.5 * decode), 0);
  EXPECT_EQ(cost.fair_chunk(16, 100, true, 1.5 * decode), 1);
  EXPECT_EQ(cost.fair_chunk(16, 100, true, 4 * decode), 3);
  EXPECT_GT(cost.fair_chunk(16, 0, false, 1.5 * decode), 4);
  EXPECT_EQ(cost.fair_chunk(16, 0, false, 100 * decode), 16);
  // A plain prefill alone runs whole chunks (the bound is at least a plain chunk's cost).
  EXPECT_EQ(cost.fair_chunk(16, 500, false, std::max(cost.cost(16, 500, false), kMaxStepDecodes * decode)), 16);
}

TEST(Scheduler, CancellationRollsBackAndFailuresAreIsolated) {
  FakeBackend backend;
  SchedulerOptions o;
  o.prefill_chunk = 2;
  Scheduler sched(backend, o);
  auto kv = backend.create_kv(32);
  const std::vector<int32_t> start = {1, 2};
  sched.run(*kv, start, {});
  std::atomic<int> polls{0};
  const std::vector<int32_t> more = {3, 4, 5, 6, 7, 8};
  try {
    sched.run(*kv, more, {}, [&] { return ++polls > 2; });  // cancelled after a chunk or two
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unavailable);
  }
  EXPECT_EQ(kv->positions(), 2);  // rolled back to before the call

  backend.fail_on = 66;
  auto good = backend.create_kv(32);
  auto bad = backend.create_kv(32);
  std::thread t([&] {
    const std::vector<int32_t> toks = {10, 66};
    EXPECT_THROW(sched.run(*bad, toks, {}), Error);
  });
  const std::vector<int32_t> toks = {10, 11};
  const auto r = sched.run(*good, toks, {});
  t.join();
  EXPECT_EQ(r.positions.back().argmax, 21);
  EXPECT_EQ(bad->positions(), 0);
  EXPECT_EQ(good->positions(), 2);
}

// Sampling's engine calls (SamplingCalls) run on the engine thread, the thread
// that runs the steps, also while other threads step; they fail once stopping.
TEST(Scheduler, SamplingCallsRunOnTheEngineThread) {
  struct Recording : FakeBackend {
    std::mutex seen_mu;
    std::set<std::thread::id> step_threads, call_threads;
    void record(std::set<std::thread::id>& s) {
      std::lock_guard lock(seen_mu);
      s.insert(std::this_thread::get_id());
    }
    void forward_batch(std::span<BatchItem> items) override {
      record(step_threads);
      FakeBackend::forward_batch(items);
    }
    bool samples_in_pass() const override { return true; }
    std::optional<int32_t> sample_token(const PositionLogits& scores, const KernelSamplingParams&,
                                        std::span<const int32_t> history, uint64_t draw_index) override {
      record(call_threads);
      return scores.argmax + static_cast<int32_t>(history.size() + draw_index);
    }
    std::optional<TokenDistribution> sampling_distribution(const PositionLogits& scores, const KernelSamplingParams&,
                                                           std::span<const int32_t>) override {
      record(call_threads);
      TokenDistribution d;
      d.tokens = {{scores.argmax, 1.0}};
      return d;
    }
    std::optional<int64_t> log_normalizer_q16(const PositionLogits& scores) override {
      record(call_threads);
      if (scores.argmax < 0) throw invalid_argument("no scores");
      return int64_t{scores.argmax} << 16;
    }
  };
  Recording backend;
  Scheduler sched(backend);
  EXPECT_TRUE(sched.samples_in_pass());
  auto kv = backend.create_kv(64);
  const std::vector<int32_t> prompt = {3, 4};
  const PositionLogits scores = sched.run(*kv, prompt, {}).positions.back();
  ASSERT_EQ(scores.argmax, 7);
  const std::vector<int32_t> history = {1, 2};
  EXPECT_EQ(sched.sample_token(scores, {}, history, 5).value(), 7 + 2 + 5);
  EXPECT_EQ(sched.sampling_distribution(scores, {}, history)->tokens.front().first, 7);
  EXPECT_EQ(sched.log_normalizer_q16(scores).value(), int64_t{7} << 16);
  EXPECT_THROW(sched.log_normalizer_q16(PositionLogits{}), Error);  // the backend's error reaches the caller

  // Calls from several threads while another thread steps.
  std::atomic<bool> stepping{true};
  std::thread stepper([&] {
    auto other = backend.create_kv(64);
    const std::vector<int32_t> one = {1};
    while (stepping && other->positions() < 60) sched.run(*other, one, {});
  });
  std::vector<std::thread> callers;
  std::atomic<int> right{0};
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&, c] {
      for (uint64_t i = 0; i < 20; ++i) right += sched.sample_token(scores, {}, history, i + c) == 7 + 2 + int(i) + c;
    });
  for (auto& t : callers) t.join();
  stepping = false;
  stepper.join();
  EXPECT_EQ(right.load(), 60);
  ASSERT_EQ(backend.step_threads.size(), 1u);
  EXPECT_EQ(backend.call_threads, backend.step_threads);  // the one engine thread
  EXPECT_EQ(backend.call_threads.count(std::this_thread::get_id()), 0u);

  sched.stop();
  try {
    sched.sample_token(scores, {}, history, 0);
    FAIL() << "a sampling call after stop() ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unavailable);
  }
}

}  // namespace
}  // namespace qwen3
