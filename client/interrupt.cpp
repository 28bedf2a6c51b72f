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

std::mutex mu;
std::function<void()> current_cancel;
unsigned current_generation = 0;
std::set<unsigned> interrupted_generations;

void watch(sigset_t set) {
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    std::function<void()> cancel;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (current_cancel && !interrupted_generations.count(current_generation)) {
        interrupted_generations.insert(current_generation);
        cancel = current_cancel;
      }
    }
    if (!cancel) {
      // Nothing to cancel, or a second Ctrl-C: leave now.
      static const char msg[] = "\ninterrupted\n";
      (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
      _exit(kExitInterrupted);
    }
    cancel();
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
  std::lock_guard<std::mutex> lock(mu);
  generation_ = ++current_generation;
  current_cancel = std::move(cancel);
}

CancelOnInterrupt::~CancelOnInterrupt() {
  std::lock_guard<std::mutex> lock(mu);
  if (current_generation == generation_) current_cancel = nullptr;
}

bool CancelOnInterrupt::interrupted() const {
  std::lock_guard<std::mutex> lock(mu);
  return interrupted_generations.count(generation_) > 0;
}

}  // namespace qwen3::cli
