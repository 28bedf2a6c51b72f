// Sessions survive a restart, and a crash: <state_dir>/sessions.json (mode
// 0600) holds every named session's committed state — its owner, context
// size and token history as of the end of its last request. It is rewritten
// whenever that state changes (a request on a named session ends, a session
// is created, deleted, evicted or expires), atomically: a temporary file,
// fsync, rename over the old one, fsync of the directory. A kill -9 at any
// moment leaves either the old or the new file, and loses at most the
// requests still running. After the next load the sessions are recreated and
// their KV recomputed in the background; while that runs a session is busy.
//
// A damaged file (not JSON, the wrong JSON type, bad entries) never stops the
// daemon: it is logged, moved aside to sessions.json.bad-<unix time>, and the
// good entries are restored. A good file whose entries cannot all be restored
// (more than max_sessions, or than a uid's quota) is copied to
// sessions.json.dropped-<unix time> before it is rewritten without them.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sessions/session_manager.h"

namespace qwen3 {

class Scheduler;

class SessionStore {
 public:
  explicit SessionStore(std::string path) : path_(std::move(path)) {}

  // Writes the committed state of `sessions` unless what is on disk is already
  // as new. Serialised: concurrent callers write once. Returns false (and
  // logs) when the file could not be written. Never throws.
  bool save(const SessionManager& sessions);
  // The valid entries of the file (none if it is missing). A file that is not
  // JSON, not an object with a "sessions" array, or that holds an entry that
  // is not a valid session is logged and moved aside (its valid entries are
  // still returned). Never throws.
  std::vector<SavedSession> load(int vocab_size);
  // Where load() moved a damaged file, "" if it did not.
  const std::string& moved_aside() const { return moved_aside_; }
  // Copies the file (unless load() moved it aside) to <path>.dropped-<unix
  // time> before a rewrite loses entries, and logs it. Never throws.
  void keep_copy(const std::string& why);
  const std::string& path() const { return path_; }

 private:
  void move_aside(const std::string& why);
  // path_ + suffix + "-<unix time>", numbered if taken.
  std::string unused_name(const std::string& suffix) const;

  std::string path_;
  std::mutex mu_;
  uint64_t written_ = 0;
  bool wrote_once_ = false;
  std::string moved_aside_;
};

// Restoring in two steps: begin_restore() reads the file and recreates its
// sessions (busy, their saved state as the committed one, so that saves made
// meanwhile keep it); finish_restore() recomputes their KV one after the other
// and frees them for use (or, when stopping, leaves the rest as saved).
struct PendingRestore {
  SavedSession saved;
  SessionLease lease;
};
std::vector<PendingRestore> begin_restore(SessionStore& store, SessionManager& sessions, int vocab_size);
int finish_restore(std::vector<PendingRestore>& pending, const std::string& from, SessionManager& sessions,
                   Scheduler& scheduler, const std::function<bool()>& stopping);

// Both steps. Recreates the sessions of `store` (all at once, busy, so that their
// committed state stays in the file while they are recomputed), then
// recomputes their KV one after the other. Returns how many were restored.
// Never throws: problems are logged, broken entries skipped.
int restore_sessions(SessionStore& store, SessionManager& sessions, Scheduler& scheduler, int vocab_size,
                     const std::function<bool()>& stopping);

// The daemon's use of the above: restores in the background once loaded, then
// saves on every change of the committed state until stop().
class SessionPersistence {
 public:
  explicit SessionPersistence(std::string path) : store_(std::move(path)) {}
  ~SessionPersistence() { stop(); }
  // Starts restoring on a background thread and saving on every change.
  void start(SessionManager& sessions, Scheduler& scheduler, int vocab_size, std::function<bool()> stopping);
  // Waits for the restorer, saves a last time and stops saving (before the sessions are freed).
  void stop();

 private:
  SessionStore store_;
  SessionManager* sessions_ = nullptr;
  std::thread restorer_;
};

}  // namespace qwen3
