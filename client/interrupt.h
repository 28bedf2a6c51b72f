// Ctrl-C handling. SIGINT/SIGTERM are blocked in every thread and received by
// one watcher thread (so no work happens in a signal handler). While a request
// runs, the first signal cancels it (grpc::ClientContext::TryCancel) and the
// command ends cleanly; a second signal, or one with nothing to cancel, exits
// with status 130 at once.
#pragma once

#include <functional>

namespace qwen3::cli {

// Call first thing in main, before any thread (gRPC's included) exists.
void install_interrupt_watcher();

// While alive, a signal runs `cancel` (once) instead of exiting. `cancel` runs
// on the watcher thread with the guard's lock held (so whatever it touches
// outlives the call): it must be quick, must not block, and must not make or
// destroy a CancelOnInterrupt.
class CancelOnInterrupt {
 public:
  explicit CancelOnInterrupt(std::function<void()> cancel);
  ~CancelOnInterrupt();
  CancelOnInterrupt(const CancelOnInterrupt&) = delete;
  CancelOnInterrupt& operator=(const CancelOnInterrupt&) = delete;
  // Whether the signal arrived while this guard was active.
  bool interrupted() const;

 private:
  unsigned generation_;
};

}  // namespace qwen3::cli
