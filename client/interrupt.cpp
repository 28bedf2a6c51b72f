#include "interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <mutex>
#include <set>
#include <thread>

#include "exit_codes.h"

namespace qwen3::cli {
namespace {

// Never destroyed: a signal may arrive while exit() runs static destructors,
// and the watcher thread must still find its state intact.
struct State {
  std::mutex mu;
  std::function<void()> current_cancel;
  unsigned current_generation = 0;
  std::set<unsigned> interrupted_generations;
};
State& state() {
  static State* s = new State;
  return *s;
}

void watch(sigset_t set) {
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    {
      State& st = state();
      std::lock_guard<std::mutex> lock(st.mu);
      if (st.current_cancel && !st.interrupted_generations.count(st.current_generation)) {
        st.interrupted_generations.insert(st.current_generation);
        // Called with the lock held: ~CancelOnInterrupt takes it too, so what
        // the function points at (a ClientContext on the caller's stack) is
        // alive for the whole call. A copy called after unlocking could run
        // after the guard and its context were gone.
        st.current_cancel();
        continue;
      }
    }
    // Nothing to cancel, or a second Ctrl-C: leave now.
    static const char msg[] = "\ninterrupted\n";
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    _exit(kExitInterrupted);
  }
}

}  // namespace

void install_interrupt_watcher() {
  // A shell starts background jobs with SIGINT ignored; an ignored signal is
  // discarded instead of queued, so sigwait would never see it.
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(watch, set).detach();
}

CancelOnInterrupt::CancelOnInterrupt(std::function<void()> cancel) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  generation_ = ++st.current_generation;
  st.current_cancel = std::move(cancel);
}

CancelOnInterrupt::~CancelOnInterrupt() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.current_generation == generation_) st.current_cancel = nullptr;
}

bool CancelOnInterrupt::interrupted() const {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.interrupted_generations.count(generation_) > 0;
}

}  // namespace qwen3::cli
