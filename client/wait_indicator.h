// Feedback while the daemon computes the prompt (prefill) and nothing has
// arrived yet: on a terminal, a spinner line on stderr ("prefill | 2.4 s"),
// erased when the first token arrives; nothing at all when stderr is not a
// terminal, so piped output stays clean. The daemon sends no prefill progress
// yet, so the line shows the time waited, not tokens done.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace qwen3::cli {

class WaitIndicator {
 public:
  // Shows nothing unless `enabled` (callers pass: stderr is a terminal and
  // the output is for a person).
  WaitIndicator(std::string label, bool enabled);
  ~WaitIndicator();
  WaitIndicator(const WaitIndicator&) = delete;
  WaitIndicator& operator=(const WaitIndicator&) = delete;

  // Erases the line and stops; later calls do nothing. Call before writing
  // the first output.
  void stop();

  static bool stderr_is_terminal();

 private:
  void run();

  std::string label_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool shown_ = false;
  std::thread thread_;
};

}  // namespace qwen3::cli
