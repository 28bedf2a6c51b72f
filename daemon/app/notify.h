// systemd notification: STATUS= text, READY=1, STOPPING=1, RELOADING=1 and the
// watchdog. Every call is a no-op when NOTIFY_SOCKET is not set.
#pragma once

#include <atomic>
#include <string>
#include <thread>

namespace qwen3 {

void notify_status(const std::string& text);
void notify_ready(const std::string& status);
void notify_stopping();
void notify_reloading();

// Sends WATCHDOG=1 at half of WATCHDOG_USEC while it lives (when set).
class WatchdogPinger {
 public:
  WatchdogPinger();
  ~WatchdogPinger();

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace qwen3
