// What a SIGHUP does with a re-read configuration, by the key table
// (config_keys.cpp): keys marked OnReload::apply take their new values, the
// others keep the running ones and are reported as needing a restart.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "service/config.h"

namespace qwen3 {

// A key whose value on disk differs from the one in force.
struct KeyChange {
  std::string key;
  std::string in_force;  // as a config file would say it
  std::string on_disk;   // the re-read file with the command line's flags over it
};

struct ReloadPlan {
  DaemonConfig next;                     // to run with: the applied keys new, the restart-only ones as they were
  std::vector<KeyChange> applied;        // keys a reload applies that changed
  std::vector<KeyChange> restart_needed;  // restart-only keys that changed; not applied
};

ReloadPlan plan_reload(const DaemonConfig& running, const DaemonConfig& on_disk);
// "kv_bits 8 -> 16": the change as the log says it ("" shows as "").
std::string change_text(const KeyChange& change);

// The restart-only keys that differ on disk since the last reload, for GetStatus.
class RestartNeeded {
 public:
  void set(std::vector<KeyChange> keys);
  std::vector<KeyChange> keys() const;

 private:
  mutable std::mutex mu_;
  std::vector<KeyChange> keys_;
};

}  // namespace qwen3
