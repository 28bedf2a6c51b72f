// Kernel-driven generations through the engine thread (scheduler.h): a
// generation is cut into turns of a few tokens, each one submission
// (Backend::generate_in_kernel); the next turn feeds the last chosen token,
// continues the draw index and the penalty history, so the tokens are those
// of one long generation (docs/kernel-driver.md, "Several sessions").
#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "scheduler/kernel_turn.h"
#include "scheduler/scheduler.h"

namespace qwen3 {

namespace {

// A turn that was not yielded ends the generation unless it gave every
// token asked (fewer: the context's end).
bool ends_generation(const KernelGenerateResult& turn, bool yielded, int asked) {
  return turn.finish != KernelFinish::length || (!yielded && turn.tokens.size() < static_cast<size_t>(asked));
}

void add_figures(KernelGenerateResult& all, const KernelGenerateResult& turn) {
  all.links += turn.links;
  if (turn.max_link_ms > all.max_link_ms) {
    all.max_link_ms = turn.max_link_ms;
    all.max_link_op = turn.max_link_op;
  }
  if (turn.repeat_link_ms > all.repeat_link_ms) {
    all.repeat_link_ms = turn.repeat_link_ms;
    all.repeat_link_op = turn.repeat_link_op;
  }
  all.kernel_ms += turn.kernel_ms;
  all.busy_ms += turn.busy_ms;
  if (all.chain_links.size() < turn.chain_links.size()) all.chain_links.resize(turn.chain_links.size());
  for (size_t i = 0; i < turn.chain_links.size(); ++i) all.chain_links[i] += turn.chain_links[i];
}

}  // namespace

int Scheduler::kernel_turn_tokens() const {
  std::lock_guard lock(mu_);
  return turn_tokens_locked();
}

int Scheduler::turn_tokens_locked() const {
  if (kernel_ms_per_token_ <= 0) return 1;
  const double n = double(options_.kernel_turn.count()) / kernel_ms_per_token_;
  return std::clamp(static_cast<int>(n), 1, kMaxKernelTurnTokens);
}

std::optional<KernelGenerateResult> Scheduler::generate_in_kernel(KvCache& kv, const KernelGenerateRequest& req,
                                                                  const std::function<bool(int32_t, int)>& on_token,
                                                                  const std::function<bool()>& cancelled) {
  if (req.feed.empty()) throw invalid_argument("nothing to feed: the token list is empty");
  if (req.max_tokens < 1) throw invalid_argument("max_tokens must be >= 1");
  const int start = kv.positions();
  std::span<const int32_t> feed = req.feed;
  KernelGenerateResult all;
  // A long feed's head is prefilled as run() paces prefills; the first turn feeds the rest.
  if (feed.size() > static_cast<size_t>(options_.prefill_chunk)) {
    const size_t head = feed.size() - static_cast<size_t>(options_.prefill_chunk);
    try {
      run(kv, feed.first(head), ForwardWants{}, cancelled);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::unavailable || !cancelled || !cancelled()) throw;
      all.finish = KernelFinish::cancelled;
      return all;
    }
    feed = feed.subspan(head);
  }
  std::vector<int32_t> history(req.history.begin(), req.history.end());
  int32_t last = 0;
  for (;;) {
    KernelGenerateRequest turn = req;
    turn.feed = feed;
    turn.history = history;
    turn.draw0 = req.draw0 + all.tokens.size();
    turn.max_tokens = req.max_tokens - static_cast<int>(all.tokens.size());  // the engine ends it early (yields)
    bool yielded = false;
    auto r = kernel_turn(kv, turn, static_cast<int>(all.tokens.size()), on_token, cancelled, yielded);
    if (!r) {
      if (!all.tokens.empty()) throw Error("the kernel driver declined a generation's later turn");
      kv.truncate(start);
      return std::nullopt;
    }
    add_figures(all, *r);
    all.tokens.insert(all.tokens.end(), r->tokens.begin(), r->tokens.end());
    history.insert(history.end(), r->tokens.begin(), r->tokens.end());
    all.finish = r->finish;
    if (ends_generation(*r, yielded, turn.max_tokens) || static_cast<int>(all.tokens.size()) >= req.max_tokens)
      break;
    // The next turn feeds the last chosen token: none when the context is full
    // (one long generation stops there too, at length).
    if (kv.positions() >= kv.max_context()) break;
    last = all.tokens.back();
    feed = std::span<const int32_t>(&last, 1);
  }
  return all;
}

// One turn, from the caller's thread: queued, run by the engine thread, its
// tokens handed to on_token here as they come. The result's tokens are those
// given to on_token; the cache holds every fed token but the last of them.
std::optional<KernelGenerateResult> Scheduler::kernel_turn(KvCache& kv, const KernelGenerateRequest& req, int index0,
                                                           const std::function<bool(int32_t, int)>& on_token,
                                                           const std::function<bool()>& cancelled, bool& yielded) {
  auto t = std::make_shared<KernelTurn>();
  t->kv = &kv;
  t->req = req;
  t->cancelled = cancelled;
  const int before = kv.positions();
  std::vector<int32_t> given;
  bool stopped = false;
  std::unique_lock lock(mu_);
  if (stopping_) throw unavailable("the daemon is stopping");
  kernel_queue_.push_back(t);
  work_cv_.notify_all();
  for (;;) {
    t->cv.wait(lock, [&] { return t->done || !t->chosen.empty(); });
    while (!t->chosen.empty()) {
      const int32_t id = t->chosen.front();
      t->chosen.pop_front();
      if (stopped) continue;  // chosen past the stop: dropped
      lock.unlock();
      const bool go = on_token(id, index0 + static_cast<int>(given.size()));
      lock.lock();
      given.push_back(id);
      if (!go) {
        stopped = true;
        t->stop = true;
      }
    }
    if (t->done) break;
  }
  lock.unlock();
  if (t->error) std::rethrow_exception(t->error);
  KernelGenerateResult r;
  if (t->dropped) {
    r.finish = KernelFinish::cancelled;
    return r;
  }
  if (!t->result) return std::nullopt;
  r = std::move(*t->result);
  if (r.tokens.size() > given.size())  // the engine chose more than were taken: forget them
    kv.truncate(given.empty() ? before : before + static_cast<int>(req.feed.size() + given.size()) - 1);
  r.tokens = std::move(given);
  if (stopped || t->cancelled_now) {
    r.finish = KernelFinish::cancelled;
  } else if (t->yielded) {  // ended by the engine, not by the chain: what the chain would have said
    yielded = true;
    const bool stop_id = !r.tokens.empty() &&
                         std::find(req.stop_ids.begin(), req.stop_ids.end(), r.tokens.back()) != req.stop_ids.end();
    r.finish = stop_id ? KernelFinish::stop : KernelFinish::length;
  }
  return r;
}

// The engine thread's side: the next turn in arrival order, run unlocked. It
// runs until the generation ends, or, once it has run kernel_turn while other
// work waits, ends after the token at hand (the next turn continues from it).
// Its time per token (decode turns) is what the pacing of prefills charges.
void Scheduler::run_kernel_turn(std::unique_lock<std::mutex>& lock) {
  std::shared_ptr<KernelTurn> t = kernel_queue_.front();
  kernel_queue_.pop_front();
  lock.unlock();
  const auto start = std::chrono::steady_clock::now();
  try {
    t->result = backend_.generate_in_kernel(*t->kv, t->req, [&](int32_t id, int) {
      bool others = false;
      {
        std::lock_guard g(mu_);
        t->chosen.push_back(id);
        others = !queue_.empty() || !kernel_queue_.empty() || !calls_.empty();
      }
      t->cv.notify_all();
      if (t->stop.load()) return false;
      if (t->cancelled && t->cancelled()) {
        t->cancelled_now = true;
        return false;
      }
      if (others && std::chrono::steady_clock::now() - start >= options_.kernel_turn) {
        t->yielded = true;
        return false;
      }
      return true;
    });
  } catch (...) {
    t->error = std::current_exception();
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  lock.lock();
  stats_.kernel_turns += 1;
  if (t->result) {
    const size_t n = t->result->tokens.size();
    stats_.kernel_tokens += n;
    if (t->req.feed.size() == 1 && n > 0 && t->result->finish != KernelFinish::cancelled) {
      const double per = ms / double(n);
      kernel_ms_per_token_ = kernel_ms_per_token_ <= 0 ? per : 0.7 * kernel_ms_per_token_ + 0.3 * per;
    }
  }
  t->done = true;
  t->cv.notify_all();
}

}  // namespace qwen3
