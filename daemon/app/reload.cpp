#include "app/reload.h"

#include <spdlog/spdlog.h>

#include "app/logging.h"
#include "app/notify.h"

namespace qwen3 {

void reload(const Flags& flags, DaemonConfig& current, ModelHost& host, Listener& listener, InferenceCore& core,
            RestartNeeded& restart_needed) {
  // RELOADING=1 must be followed by READY=1: only once loaded (before that,
  // READY=1 would tell systemd the model is loaded when it is not).
  const bool loaded = host.progress().state == LoadState::ready;
  if (loaded) notify_reloading();
  DaemonConfig on_disk;
  try {
    on_disk = read_config(flags);
  } catch (const std::exception& e) {
    spdlog::error("reload: configuration rejected, keeping the running one: {}", e.what());
    if (loaded) notify_ready(host.progress().text + " (last reload failed: " + e.what() + ")");
    return;
  }
  ReloadPlan plan = plan_reload(current, on_disk);
  const DaemonConfig& next = plan.next;
  set_log_level(next.log_level);
  if (Runtime* rt = host.runtime_if_ready()) rt->sessions->set_limits(session_limits_from(next, rt->backend->config()));
  listener.set_groups(next.socket_group, next.admin_group);
  core.set_default_max_new_tokens(next.default_max_new_tokens);
  core.set_default_speculative(next.speculative);
  current = next;
  restart_needed.set(plan.restart_needed);

  if (plan.applied.empty() && plan.restart_needed.empty()) spdlog::info("reload: configuration unchanged");
  for (const auto& c : plan.applied) spdlog::info("reload: {}", change_text(c));
  for (const auto& c : plan.restart_needed)
    spdlog::warn("reload: {} needs a restart (systemctl restart qwen3-bpfd); not applied, {} stays in force",
                 change_text(c), c.in_force.empty() ? "\"\"" : c.in_force);
  if (loaded) notify_ready(host.progress().text);
}

}  // namespace qwen3
