// One turn of a kernel-driven generation (Scheduler::generate_in_kernel): a
// submission of req.max_tokens tokens at most. The engine thread queues the
// chosen tokens here; the caller's thread hands them to its on_token and sets
// `stop` when that says so. Shared by scheduler.cpp and kernel_turns.cpp.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <optional>

#include "scheduler/scheduler.h"

namespace qwen3 {

struct Scheduler::KernelTurn {
  KvCache* kv = nullptr;
  KernelGenerateRequest req;  // spans into the waiting caller's vectors
  std::function<bool()> cancelled;
  std::deque<int32_t> chosen;  // not yet taken by the caller (under the scheduler's mutex)
  std::atomic<bool> stop{false};
  bool done = false;
  bool dropped = false;  // cancelled before it ran
  // Set by the engine thread before `done` (read after it, under the mutex):
  bool yielded = false;        // ended after kernel_turn because other work waits
  bool cancelled_now = false;  // `cancelled` said so at a token
  std::optional<KernelGenerateResult> result;
  std::exception_ptr error;
  std::condition_variable cv;
};

}  // namespace qwen3
