#include "scheduler/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/error.h"
#include "scheduler/kernel_turn.h"

namespace qwen3 {

// One sampling call for the engine thread; the caller waits for `done`.
struct Scheduler::Call {
  std::function<void()> fn;
  bool done = false;
  std::exception_ptr error;
  std::condition_variable cv;
};

struct Scheduler::Job {
  KvCache* kv = nullptr;
  std::vector<int32_t> tokens;
  ForwardWants wants;
  std::function<bool()> cancelled;
  int start_positions = 0;  // where to roll back to
  size_t fed = 0;           // tokens already fed
  double credit = 0;        // work a long prefill may do beside latency-bound work (StepCostModel units)
  ForwardResult result;     // accumulated (all_positions) or last chunk's
  ForwardResult chunk_result;
  bool done = false;
  std::exception_ptr error;
  std::condition_variable cv;
};

StepCostModel StepCostModel::of(const ModelConfig& c) {
  StepCostModel m;
  const double h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), inter = c.intermediate_size;
  const double layers = c.num_hidden_layers;
  m.per_token = layers * (h * (q + 2 * kv) + q * h + 3 * h * inter);
  m.per_logits = double(c.vocab_size) * h;
  m.per_attended = layers * 2 * q;
  return m;
}

double StepCostModel::cost(int n, int start, bool all_positions) const {
  const double reported = all_positions ? n : 1;  // the last fed position always gets its logits
  return n * per_token + reported * per_logits + per_attended * (double(n) * start + double(n) * (n + 1) / 2);
}

int StepCostModel::fair_chunk(int max_tokens, int start, bool all_positions, double bound) const {
  int n = 0;
  while (n < max_tokens && cost(n + 1, start, all_positions) <= bound) ++n;
  return n;
}

Scheduler::Scheduler(Backend& backend, SchedulerOptions options)
    : backend_(backend), options_(options), cost_(StepCostModel::of(backend.config())) {
  if (options_.prefill_chunk < 1) options_.prefill_chunk = 1;
  if (options_.max_batch_tokens < 1) options_.max_batch_tokens = 1;
  engine_ = std::thread([this] { engine_loop(); });
}

Scheduler::~Scheduler() {
  stop();
  if (engine_.joinable()) engine_.join();
}

void Scheduler::stop() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  work_cv_.notify_all();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mu_);
  SchedulerStats s = stats_;
  s.queued = static_cast<int>(queue_.size());
  return s;
}

ForwardResult Scheduler::run(KvCache& kv, std::span<const int32_t> tokens, const ForwardWants& wants,
                             const std::function<bool()>& cancelled) {
  if (tokens.empty()) throw invalid_argument("nothing to feed: the token list is empty");
  auto job = std::make_shared<Job>();
  job->kv = &kv;
  job->tokens.assign(tokens.begin(), tokens.end());
  job->wants = wants;
  job->cancelled = cancelled;
  job->start_positions = kv.positions();
  std::unique_lock lock(mu_);
  if (stopping_) throw unavailable("the daemon is stopping");
  queue_.push_back(job);
  work_cv_.notify_all();
  job->cv.wait(lock, [&] { return job->done; });
  if (job->error) std::rethrow_exception(job->error);
  return std::move(job->result);
}

void Scheduler::engine_loop() {
  std::unique_lock lock(mu_);
  engine_id_ = std::this_thread::get_id();
  for (;;) {
    work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !kernel_queue_.empty() || !calls_.empty(); });
    if (stopping_) {
      fail_all_locked();
      return;
    }
    // Sampling calls first: each is one short kernel call its caller waits on.
    if (!calls_.empty()) {
      run_calls_locked(lock);
      continue;
    }
    // Let the sessions of the previous step come back so they share this one
    // (not while a kernel-driven turn waits: it goes first then).
    if (kernel_queue_.empty() && queue_.size() < last_batch_size_ && options_.gather_wait.count() > 0) {
      work_cv_.wait_for(lock, options_.gather_wait,
                        [&] { return stopping_ || queue_.size() >= last_batch_size_ || !calls_.empty(); });
      if (stopping_ || !calls_.empty()) continue;
    }

    drop_cancelled(lock);
    // Kernel-driven turns and user-driven steps alternate.
    if (!kernel_queue_.empty() && (queue_.empty() || kernel_next_)) {
      kernel_next_ = false;
      run_kernel_turn(lock);
      continue;
    }
    kernel_next_ = true;
    if (queue_.empty()) continue;

    std::vector<std::pair<std::shared_ptr<Job>, int>> picked;
    if (!pick_batch_locked(picked)) {
      // Only paced prefills wait, saving up for their next token: until the
      // latency-bound work is back (or the pause is over).
      if (kernel_queue_.empty()) work_cv_.wait_for(lock, std::chrono::milliseconds(1));
      continue;
    }
    last_batch_size_ = picked.size();

    lock.unlock();
    const auto step_start = std::chrono::steady_clock::now();
    run_batch(picked);
    last_step_time_ = std::chrono::steady_clock::now() - step_start;
    lock.lock();
    finish_step_locked(picked);
  }
}

// The user-driven step: decode steps (one token left) first, then prefill
// chunks in round-robin turns. False: nothing may run now (paced prefills).
bool Scheduler::pick_batch_locked(std::vector<std::pair<std::shared_ptr<Job>, int>>& picked) {
  int budget = options_.max_batch_tokens;
  std::vector<std::shared_ptr<Job>> prefills;
  // What the waiting latency-bound work costs: decoding sessions, prompts
  // that fit in one chunk, and kernel-driven turns (a turn's tokens, each a
  // decode step). A long prefill would multiply their step time.
  bool latency_waits = !kernel_queue_.empty();
  double latency_cost = 0;
  for (auto& turn : kernel_queue_)
    latency_cost += std::min(turn->req.max_tokens, turn_tokens_locked()) * cost_.cost(1, turn->kv->positions(), false);
  for (auto& job : queue_) {
    const size_t left = job->tokens.size() - job->fed;
    if (left <= static_cast<size_t>(options_.prefill_chunk)) {
      latency_waits = true;
      latency_cost += cost_.cost(static_cast<int>(left), job->kv->positions(), job->wants.all_positions);
    }
    if (left == 1 && budget > 0) {
      picked.emplace_back(job, 1);
      budget -= 1;
    } else if (left > 1) {
      prefills.push_back(job);
    }
  }
  // Latency-bound work that ran just now is usually only away sending its
  // token: keep pacing long prefills for a moment rather than let them take
  // full chunks in the gap.
  const auto now = std::chrono::steady_clock::now();
  const bool latency_here = latency_waits;  // (credit is earned only beside work that is really here)
  if (latency_waits) {
    latency_seen_ = now;
    latency_cost_seen_ = latency_cost;
  } else if (now - latency_seen_ < std::max<std::chrono::steady_clock::duration>(2 * last_step_time_,
                                                                                  std::chrono::milliseconds(2))) {
    latency_waits = true;
    latency_cost = latency_cost_seen_;
  }
  for (size_t i = 0; i < prefills.size(); ++i) {
    auto& job = prefills[(prefill_turn_ + i) % prefills.size()];
    if (budget <= 0 && !picked.empty()) break;
    const int left = static_cast<int>(job->tokens.size() - job->fed);
    int chunk = options_.prefill_chunk;
    if (latency_waits && left > options_.prefill_chunk) {
      // A long prefill beside latency-bound work earns kLongPrefillShare of that
      // work's cost per step and spends it on chunks (skipping steps until one
      // token is paid for), so their steps take at most about 1.5x as long as
      // alone while it still advances. Alone it runs at full chunks.
      if (latency_here) job->credit += kLongPrefillShare * latency_cost;
      const int start = job->kv->positions();
      chunk = std::min(cost_.fair_chunk(chunk, start, job->wants.all_positions, job->credit), budget);
      if (chunk < 1) continue;  // not this step
      job->credit -= cost_.cost(chunk, start, job->wants.all_positions);
    } else {
      job->credit = 0;
      // Every step stays bounded: a chunk that reports every position costs no
      // more than a plain chunk would (or kMaxStepDecodes decode steps), so
      // whoever arrives next waits for a short step.
      const int start = job->kv->positions();
      const double bound = std::max(cost_.cost(chunk, start, false), kMaxStepDecodes * cost_.cost(1, 0, false));
      chunk = std::max(1, cost_.fair_chunk(chunk, start, job->wants.all_positions, bound));
    }
    const int n = std::max(1, std::min({left, chunk, budget}));
    picked.emplace_back(job, n);
    budget -= n;
  }
  if (!prefills.empty()) prefill_turn_ = (prefill_turn_ + 1) % prefills.size();
  return !picked.empty();
}

std::optional<TokenDistribution> Scheduler::sampling_distribution(const PositionLogits& scores,
                                                                 const KernelSamplingParams& params,
                                                                 std::span<const int32_t> history) {
  std::optional<TokenDistribution> out;
  on_engine_thread([&] { out = backend_.sampling_distribution(scores, params, history); });
  return out;
}

std::optional<int32_t> Scheduler::sample_token(const PositionLogits& scores, const KernelSamplingParams& params,
                                               std::span<const int32_t> history, uint64_t draw_index) {
  std::optional<int32_t> out;
  on_engine_thread([&] { out = backend_.sample_token(scores, params, history, draw_index); });
  return out;
}

std::optional<int64_t> Scheduler::log_normalizer_q16(const PositionLogits& scores) {
  std::optional<int64_t> out;
  on_engine_thread([&] { out = backend_.log_normalizer_q16(scores); });
  return out;
}

// On the engine thread itself (a backend callback) the call runs directly:
// queueing it would wait for this very thread.
void Scheduler::on_engine_thread(const std::function<void()>& fn) {
  std::unique_lock lock(mu_);
  if (std::this_thread::get_id() == engine_id_) {
    lock.unlock();
    fn();
    return;
  }
  if (stopping_) throw unavailable("the daemon is stopping");
  auto call = std::make_shared<Call>();
  call->fn = fn;
  calls_.push_back(call);
  work_cv_.notify_all();
  call->cv.wait(lock, [&] { return call->done; });
  if (call->error) std::rethrow_exception(call->error);
}

// The waiting sampling calls, run unlocked in arrival order.
void Scheduler::run_calls_locked(std::unique_lock<std::mutex>& lock) {
  std::deque<std::shared_ptr<Call>> calls;
  calls.swap(calls_);
  lock.unlock();
  for (auto& call : calls) {
    try {
      call->fn();
    } catch (...) {
      call->error = std::current_exception();
    }
  }
  lock.lock();
  for (auto& call : calls) {
    call->done = true;
    call->cv.notify_all();
  }
}

// Stopping: every waiting job fails with unavailable.
void Scheduler::fail_all_locked() {
  for (auto& job : queue_) {
    job->error = std::make_exception_ptr(unavailable("the daemon is stopping"));
    job->done = true;
    job->cv.notify_all();
  }
  queue_.clear();
  for (auto& turn : kernel_queue_) {
    turn->error = std::make_exception_ptr(unavailable("the daemon is stopping"));
    turn->done = true;
    turn->cv.notify_all();
  }
  kernel_queue_.clear();
  for (auto& call : calls_) {
    call->error = std::make_exception_ptr(unavailable("the daemon is stopping"));
    call->done = true;
    call->cv.notify_all();
  }
  calls_.clear();
}

// Drops cancelled jobs before spending work on them (the checks run unlocked:
// they call into gRPC); their KV is rolled back. A cancelled kernel-driven
// turn ends without running (its generation finishes cancelled).
void Scheduler::drop_cancelled(std::unique_lock<std::mutex>& lock) {
  std::vector<std::shared_ptr<Job>> waiting(queue_.begin(), queue_.end());
  std::vector<std::shared_ptr<KernelTurn>> turns(kernel_queue_.begin(), kernel_queue_.end());
  std::vector<char> cancel(waiting.size(), 0), cancel_turn(turns.size(), 0);
  lock.unlock();
  for (size_t i = 0; i < waiting.size(); ++i) cancel[i] = waiting[i]->cancelled && waiting[i]->cancelled();
  for (size_t i = 0; i < turns.size(); ++i) cancel_turn[i] = turns[i]->cancelled && turns[i]->cancelled();
  lock.lock();
  for (size_t i = 0; i < waiting.size(); ++i) {
    if (!cancel[i]) continue;
    auto& job = waiting[i];
    job->kv->truncate(job->start_positions);
    job->error = std::make_exception_ptr(unavailable("cancelled"));
    job->done = true;
    job->cv.notify_all();
    queue_.erase(std::find(queue_.begin(), queue_.end(), job));
  }
  for (size_t i = 0; i < turns.size(); ++i) {
    if (!cancel_turn[i]) continue;
    auto it = std::find(kernel_queue_.begin(), kernel_queue_.end(), turns[i]);
    if (it == kernel_queue_.end()) continue;  // failed meanwhile (stopping)
    turns[i]->dropped = true;
    turns[i]->done = true;
    turns[i]->cv.notify_all();
    kernel_queue_.erase(it);
  }
}

// After a step: the counters, and the jobs it finished leave the queue and wake their callers.
void Scheduler::finish_step_locked(const std::vector<std::pair<std::shared_ptr<Job>, int>>& picked) {
  stats_.steps += 1;
  stats_.items += picked.size();
  stats_.max_batch = std::max(stats_.max_batch, static_cast<int>(picked.size()));
  for (auto& [job, n] : picked) {
    stats_.tokens += n;
    if (job->done) {
      queue_.erase(std::find(queue_.begin(), queue_.end(), job));
      job->cv.notify_all();
    }
  }
}

// Runs one step for the picked jobs (outside the lock). Marks finished or failed jobs done.
void Scheduler::run_batch(std::vector<std::pair<std::shared_ptr<Job>, int>>& picked) {
  std::vector<BatchItem> items(picked.size());
  std::vector<int> before(picked.size());
  for (size_t i = 0; i < picked.size(); ++i) {
    auto& [job, n] = picked[i];
    const bool last_chunk = job->fed + n == job->tokens.size();
    BatchItem& item = items[i];
    item.kv = job->kv;
    item.tokens = std::span<const int32_t>(job->tokens).subspan(job->fed, n);
    if (last_chunk) {
      item.wants = job->wants;
      // A draft's draws in the pass start at its first position (PassSampling):
      // a later chunk's are the caller's Sampler's, from the scores.
      if (job->wants.all_positions && job->fed > 0) item.wants.sample.reset();
    } else {
      // Intermediate chunks only matter for their K/V, and for the argmax of every position.
      item.wants = ForwardWants{};
      item.wants.all_positions = job->wants.all_positions;
    }
    job->chunk_result = ForwardResult{};
    item.result = &job->chunk_result;
    before[i] = job->kv->positions();
  }

  auto absorb = [](Job& job, int n) {
    job.fed += n;
    auto& got = job.chunk_result.positions;
    if (job.wants.all_positions) {
      for (auto& p : got) job.result.positions.push_back(std::move(p));
    } else {
      job.result.positions = std::move(got);
    }
    if (job.fed == job.tokens.size()) job.done = true;
  };
  auto fail = [](Job& job, std::exception_ptr e) {
    job.kv->truncate(job.start_positions);
    job.error = e;
    job.done = true;
  };

  try {
    backend_.forward_batch(items);
    for (size_t i = 0; i < picked.size(); ++i) absorb(*picked[i].first, picked[i].second);
    return;
  } catch (const std::exception& e) {
    if (picked.size() == 1) {
      fail(*picked[0].first, std::current_exception());
      return;
    }
    spdlog::warn("batched step of {} sequences failed ({}); running them one by one to isolate the failure",
                 picked.size(), e.what());
  }
  // Isolate: undo whatever the failed batch appended, then run each alone.
  for (size_t i = 0; i < picked.size(); ++i) {
    auto& [job, n] = picked[i];
    if (job->kv->positions() > before[i]) job->kv->truncate(before[i]);
    try {
      job->chunk_result = backend_.forward(*job->kv, items[i].tokens, items[i].wants);
      absorb(*job, n);
    } catch (...) {
      fail(*job, std::current_exception());
    }
  }
}

}  // namespace qwen3
