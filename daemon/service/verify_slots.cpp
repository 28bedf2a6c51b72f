#include "service/verify_slots.h"

#include "common/error.h"

namespace qwen3 {

VerifySlots::Hold VerifySlots::acquire(std::chrono::milliseconds max_wait, const std::function<bool()>& cancelled) {
  const auto deadline = std::chrono::steady_clock::now() + max_wait;
  std::unique_lock lock(mu_);
  while (running_ >= limit_) {
    if (cancelled && cancelled()) throw unavailable("cancelled while waiting for a verification slot");
    if (std::chrono::steady_clock::now() >= deadline)
      throw resource_exhausted(std::to_string(limit_) + " verifications are running and the queue wait of " +
                               std::to_string(max_wait.count() / 1000) + " s ran out; retry later");
    cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  ++running_;
  return Hold(this);
}

}  // namespace qwen3
