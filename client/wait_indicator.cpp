#include "wait_indicator.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace qwen3::cli {

WaitIndicator::WaitIndicator(std::string label, bool enabled) : label_(std::move(label)) {
  if (enabled) thread_ = std::thread([this] { run(); });
}

WaitIndicator::~WaitIndicator() { stop(); }

bool WaitIndicator::stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

void WaitIndicator::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WaitIndicator::run() {
  static const char frames[] = "|/-\\";
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  // A short wait shows nothing (no flicker on a fast prefill).
  if (cv_.wait_for(lock, std::chrono::milliseconds(150), [this] { return stopping_; })) return;
  for (int frame = 0;; ++frame) {
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "\r%s %c %.1f s\033[K", label_.c_str(), frames[frame % 4], waited);
    std::fflush(stderr);
    shown_ = true;
    if (cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stopping_; })) break;
  }
  if (shown_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
}

}  // namespace qwen3::cli
