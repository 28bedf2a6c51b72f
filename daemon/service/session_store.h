// Sessions survive a restart: at shutdown the idle named sessions' token
// histories are written to <state_dir>/sessions.json (mode 0600); after the
// next load they are recreated and their KV recomputed (so a restart loses
// nothing but time). While a session is being restored it is busy.
#pragma once

#include <functional>
#include <string>

namespace qwen3 {

class SessionManager;
class Scheduler;

// Returns how many sessions were saved. Never throws: problems are logged.
int save_sessions(const std::string& path, const SessionManager& sessions);
// Recreates the sessions saved in `path`, then removes the file. Returns how
// many were restored. Never throws: problems are logged, broken entries skipped.
int restore_sessions(const std::string& path, SessionManager& sessions, Scheduler& scheduler, int vocab_size,
                     const std::function<bool()>& stopping);

}  // namespace qwen3
