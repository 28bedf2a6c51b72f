#include "app/notify.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <chrono>

namespace qwen3 {

namespace {
void send(const std::string& message) {
  // unset_environment=0: children (the verify sandbox) never see NOTIFY_SOCKET anyway.
  const int r = sd_notify(0, message.c_str());
  if (r < 0) spdlog::debug("sd_notify({}) failed: {}", message, r);
}
}  // namespace

void notify_status(const std::string& text) { send("STATUS=" + text); }
void notify_ready(const std::string& status) { send("READY=1\nSTATUS=" + status); }
void notify_stopping() { send("STOPPING=1\nSTATUS=stopping"); }
void notify_reloading() { send("RELOADING=1"); }

WatchdogPinger::WatchdogPinger() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return;
  spdlog::info("systemd watchdog enabled: pinging every {} ms", usec / 2000);
  thread_ = std::thread([this, usec] {
    const auto period = std::chrono::microseconds(usec / 2);
    auto next = std::chrono::steady_clock::now();
    while (!stop_) {
      if (std::chrono::steady_clock::now() >= next) {
        sd_notify(0, "WATCHDOG=1");
        next += period;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
}

WatchdogPinger::~WatchdogPinger() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace qwen3
