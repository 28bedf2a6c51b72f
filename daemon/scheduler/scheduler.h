// The engine thread. Request handlers submit forward steps (a prompt to
// prefill, or one decode token) for their session's KV cache and wait; every
// iteration the engine thread gathers all waiting steps — one decode position
// or one prefill chunk per session — into a single Backend::forward_batch, so
// concurrent sessions share the passes over the weights. Long prefills are cut
// into chunks so that decoding sessions keep moving (fairness); prefill chunks
// take turns in round-robin order. While latency-bound work waits (a decoding
// session, a prompt that fits in one chunk), a longer prefill is paced by the
// StepCostModel to half that work's cost (kLongPrefillShare): small chunks,
// skipping steps when even one token costs more, so a short request's steps
// take about 1.5x as long as alone on average while the prefill still advances.
//
// Kernel-driven generations (Backend::generate_in_kernel, docs/kernel-driver.md)
// go through the same thread in turns: a turn is one submission that runs
// until the generation ends or, once it has run kernel_turn while other work
// waits, ends after the token at hand; the next turn feeds the last chosen
// token and continues the draw index and the penalty history, so the tokens
// are those of one long generation. Kernel turns and the batched user-driven
// steps alternate, and the kernel generations take turns in arrival order, so
// no session waits more than about one turn per other session.
//
// Sampling's calls on the engine (SamplingCalls: the kernel's probabilities,
// draw and logprob normalizer over a position's scores: BPF reads them where
// the pass left them while no later step overwrote them) run on the
// same thread too: the Scheduler is the SamplingCalls the daemon's Samplers
// use. Each call runs between steps, before the next one, so it waits for at
// most the step at hand (a kernel turn yields to it after kernel_turn).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "engine/backend.h"

namespace qwen3 {

struct SchedulerOptions {
  int prefill_chunk = 64;        // tokens of one session's prefill per step
  int max_batch_tokens = 256;    // tokens of all sessions per step (at least one item always runs)
  // When fewer steps are waiting than ran in the previous batch, wait this long
  // for the others to come back (they are usually streaming their last token).
  std::chrono::microseconds gather_wait{1000};
  // How long a kernel-driven turn runs while other work waits (it ends at
  // the first token after this; alone it runs on).
  std::chrono::milliseconds kernel_turn{50};
};

inline constexpr int kMaxKernelTurnTokens = 64;

// What a step costs, in multiply-adds from the model's shape: every fed token
// passes the layers, every reported position the vocabulary projection, and
// attention grows with the positions already cached. Only ratios matter.
// The share of the waiting latency-bound work's cost that a long prefill gets
// beside it, per step.
inline constexpr double kLongPrefillShare = 0.5;
// What one step of a prefill alone may cost at least, in decode steps (a
// chunk of prefill_chunk plain tokens may always run whole).
inline constexpr double kMaxStepDecodes = 4;

struct StepCostModel {
  double per_token = 0;     // one position through every layer's matrices
  double per_logits = 0;    // one position's vocabulary projection
  double per_attended = 0;  // one position attending to one cached position, all layers
  static StepCostModel of(const ModelConfig& config);
  // Feeding n tokens after `start` cached positions.
  double cost(int n, int start, bool all_positions) const;
  // The most tokens (0..max_tokens) of a prefill at `start` that cost no more than `bound`.
  int fair_chunk(int max_tokens, int start, bool all_positions, double bound) const;
};

struct SchedulerStats {
  uint64_t steps = 0;          // forward_batch calls
  uint64_t items = 0;          // sequence-steps run
  uint64_t tokens = 0;         // positions computed
  int max_batch = 0;           // most sequences in one step
  int queued = 0;              // waiting now
  uint64_t kernel_turns = 0;   // kernel-driven submissions run
  uint64_t kernel_tokens = 0;  // tokens they chose
};

class Scheduler : public SamplingCalls {
 public:
  Scheduler(Backend& backend, SchedulerOptions options = {});
  ~Scheduler();  // stops the engine thread; waiting callers get unavailable

  // Feeds `tokens` after what `kv` holds and returns the logits the caller asked
  // for (for all_positions: every fed position, across chunks). Blocks until
  // done. `cancelled` is polled between chunks; when it returns true the call
  // throws Error(unavailable, "cancelled") and the cache is rolled back to
  // where it was. On an error the cache is rolled back too.
  ForwardResult run(KvCache& kv, std::span<const int32_t> tokens, const ForwardWants& wants,
                    const std::function<bool()>& cancelled = {});

  // A whole generation on the kernel driver, in turns (see above). Same
  // contract as Backend::generate_in_kernel: on_token(id, index) for each
  // chosen token, called on this (the caller's) thread; returning false ends
  // the generation within about one token (finish cancelled), and so does
  // `cancelled` (polled between turns). The cache then holds every fed token
  // but the last token given to on_token. A feed longer than prefill_chunk
  // has its head prefilled as run() does (paced). nullopt: the backend
  // declined the request (the cache is as before; decode in user space).
  std::optional<KernelGenerateResult> generate_in_kernel(KvCache& kv, const KernelGenerateRequest& req,
                                                         const std::function<bool(int32_t, int)>& on_token,
                                                         const std::function<bool()>& cancelled = {});
  // Tokens of a kernel turn while other work waits (kernel_turn over the
  // measured time per token; 1 before any measurement).
  int kernel_turn_tokens() const;

  // SamplingCalls, each run by the engine thread between steps (directly when
  // called on it). Not cancellable: each is one bounded kernel call. Throws
  // unavailable once stopping, and whatever the backend throws.
  bool samples_in_pass() const override { return backend_.samples_in_pass(); }
  std::optional<TokenDistribution> sampling_distribution(const PositionLogits& scores,
                                                         const KernelSamplingParams& params,
                                                         std::span<const int32_t> history) override;
  std::optional<int32_t> sample_token(const PositionLogits& scores, const KernelSamplingParams& params,
                                      std::span<const int32_t> history, uint64_t draw_index) override;
  std::optional<int64_t> log_normalizer_q16(const PositionLogits& scores) override;

  // Stops accepting work; queued and later calls throw unavailable.
  void stop();
  SchedulerStats stats() const;

 private:
  struct Job;
  struct KernelTurn;
  struct Call;
  void engine_loop();
  // Runs fn on the engine thread (queued as a Call; directly on that thread).
  void on_engine_thread(const std::function<void()>& fn);
  void run_calls_locked(std::unique_lock<std::mutex>& lock);
  bool pick_batch_locked(std::vector<std::pair<std::shared_ptr<Job>, int>>& picked);
  void run_kernel_turn(std::unique_lock<std::mutex>& lock);
  std::optional<KernelGenerateResult> kernel_turn(KvCache& kv, const KernelGenerateRequest& req, int index0,
                                                  const std::function<bool(int32_t, int)>& on_token,
                                                  const std::function<bool()>& cancelled, bool& yielded);
  int turn_tokens_locked() const;
  void fail_all_locked();
  void drop_cancelled(std::unique_lock<std::mutex>& lock);
  void finish_step_locked(const std::vector<std::pair<std::shared_ptr<Job>, int>>& picked);
  void run_batch(std::vector<std::pair<std::shared_ptr<Job>, int>>& picked);

  Backend& backend_;
  SchedulerOptions options_;
  StepCostModel cost_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::deque<std::shared_ptr<KernelTurn>> kernel_queue_;  // in arrival order
  std::deque<std::shared_ptr<Call>> calls_;               // sampling calls, before the next step
  std::thread::id engine_id_;                             // the engine thread, once it runs
  bool kernel_next_ = true;           // a kernel turn goes before the next user-driven step
  double kernel_ms_per_token_ = 0;    // measured on decode turns (0: not yet)
  bool stopping_ = false;
  size_t prefill_turn_ = 0;
  size_t last_batch_size_ = 0;
  // Pacing of long prefills: when latency-bound work was last seen, its cost
  // then, and how long the last step took.
  std::chrono::steady_clock::time_point latency_seen_{};
  double latency_cost_seen_ = 0;
  std::chrono::steady_clock::duration last_step_time_{};
  SchedulerStats stats_;
  std::thread engine_;
};

}  // namespace qwen3
