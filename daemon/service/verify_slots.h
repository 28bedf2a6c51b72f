// Bounded concurrency for the XDP verification RPCs: at most `limit` run at
// once (each compiles with clang and loads programs); further callers queue
// for up to `max_wait`, giving up early when cancelled.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace qwen3 {

class VerifySlots {
 public:
  explicit VerifySlots(int limit) : limit_(limit) {}

  class Hold {
   public:
    explicit Hold(VerifySlots* s) : slots_(s) {}
    Hold(Hold&& o) noexcept : slots_(o.slots_) { o.slots_ = nullptr; }
    Hold(const Hold&) = delete;
    ~Hold() {
      if (!slots_) return;
      std::lock_guard lock(slots_->mu_);
      --slots_->running_;
      slots_->cv_.notify_one();
    }

   private:
    VerifySlots* slots_;
  };

  // Throws qwen3::Error(resource_exhausted) after max_wait, unavailable when cancelled.
  Hold acquire(std::chrono::milliseconds max_wait, const std::function<bool()>& cancelled);
  int running() const {
    std::lock_guard lock(mu_);
    return running_;
  }

 private:
  int limit_;
  int running_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace qwen3
