#include "service/config_reload.h"

#include "service/config_keys.h"

namespace qwen3 {

ReloadPlan plan_reload(const DaemonConfig& running, const DaemonConfig& on_disk) {
  ReloadPlan plan{on_disk, {}, {}};
  for (const auto& k : config_keys()) {
    KeyChange change{k.name, k.text(running), k.text(on_disk)};
    if (change.in_force == change.on_disk) continue;
    if (k.on_reload == OnReload::apply) {
      plan.applied.push_back(std::move(change));
    } else {
      k.copy(plan.next, running);
      plan.restart_needed.push_back(std::move(change));
    }
  }
  return plan;
}

std::string change_text(const KeyChange& c) {
  auto shown = [](const std::string& v) { return v.empty() ? std::string("\"\"") : v; };
  return c.key + " " + shown(c.in_force) + " -> " + shown(c.on_disk);
}

void RestartNeeded::set(std::vector<KeyChange> keys) {
  std::lock_guard lock(mu_);
  keys_ = std::move(keys);
}

std::vector<KeyChange> RestartNeeded::keys() const {
  std::lock_guard lock(mu_);
  return keys_;
}

}  // namespace qwen3
