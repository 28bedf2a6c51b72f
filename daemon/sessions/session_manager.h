// The table of sessions: creation under a session-count limit and a total KV
// memory budget, both also per owner uid (quotas), idle TTL, and one request
// at a time per session (leases). To make room, idle sessions are evicted,
// least recently used first: the requesting uid's own, then those of uids
// above their quota; never the session of a uid within its quota.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "sessions/session.h"

namespace qwen3 {

struct SessionLimits {
  int max_sessions = 64;                  // named sessions (ephemeral ones are not counted)
  size_t kv_budget_bytes = size_t{1} << 30;  // all KV caches together, ephemeral included
  std::chrono::seconds ttl{3600};         // idle time before eviction (0: never)
  int default_context = 2048;             // a session's positions when the request gives none
  int max_context = 8192;                 // upper limit for any KV cache
  int max_sessions_per_uid = 16;          // named sessions of one owner uid
  size_t kv_budget_bytes_per_uid = size_t{512} << 20;  // KV of one owner uid's named sessions
};

struct SessionSnapshot {
  std::string id;
  int positions = 0;
  int history_tokens = 0;
  int max_context = 0;
  size_t bytes = 0;
  Clock::time_point created;
  Clock::time_point last_used;
  bool busy = false;
  uint32_t owner_uid = 0;
};

// What a restart needs to rebuild a session: its tokens (the KV is recomputed).
struct SavedSession {
  std::string id;
  int max_context = 0;
  int positions = 0;                 // how many of the tokens were cached
  std::vector<int32_t> history;
  uint32_t owner_uid = 0;
};

// The committed state of every named session, and which change it reflects.
struct SessionExport {
  uint64_t generation = 0;
  std::vector<SavedSession> sessions;
};

struct SessionTotals {
  int sessions = 0;        // named
  int ephemeral = 0;
  int busy = 0;
  size_t kv_bytes = 0;     // all KV caches
  uint64_t evicted = 0;    // sessions evicted so far (TTL or pressure)
};

class SessionManager;

// Exclusive use of a session for one request. Releasing it marks the session
// idle again (or frees it, for an ephemeral or deleted session).
class SessionLease {
 public:
  SessionLease() = default;
  SessionLease(SessionManager* manager, std::shared_ptr<Session> session)
      : manager_(manager), session_(std::move(session)) {}
  SessionLease(SessionLease&& o) noexcept { *this = std::move(o); }
  SessionLease& operator=(SessionLease&& o) noexcept;
  SessionLease(const SessionLease&) = delete;
  SessionLease& operator=(const SessionLease&) = delete;
  ~SessionLease() { release(); }

  Session* operator->() const { return session_.get(); }
  Session& operator*() const { return *session_; }
  explicit operator bool() const { return session_ != nullptr; }
  void release();

 private:
  SessionManager* manager_ = nullptr;
  std::shared_ptr<Session> session_;
};

class SessionManager {
 public:
  SessionManager(Backend& backend, SessionLimits limits);
  ~SessionManager();

  // Ownership: a named session belongs to the uid that created it. Calls that
  // take a `caller` uid see only that uid's sessions, except for root (0),
  // which sees all; another user's session is reported exactly like a missing
  // one (not_found), so its existence does not leak through these calls.

  // A named session owned by `owner`. max_context 0 = default. `id` empty = generated.
  // Throws invalid_argument (bad id / context), resource_exhausted (limits).
  SessionSnapshot create(int max_context, const std::string& id = "", uint32_t owner = 0);
  // A saved session being brought back after a restart: created busy (the
  // returned lease holds it) with `saved` as its committed state, so that it
  // is persisted as it was while its KV is recomputed. Ending the lease
  // commits nothing until finish_restore() was called on it.
  SessionLease create_restoring(const SavedSession& saved);
  static void finish_restore(SessionLease& lease);
  // A session for one request of `owner`, freed when the lease ends. It counts
  // against the total budget only; to make room it evicts as `owner` would.
  SessionLease create_ephemeral(int max_context, uint32_t owner = 0);
  // Throws not_found, or failed_precondition when a request already runs on it.
  SessionLease acquire(const std::string& id, uint32_t caller = 0);
  SessionSnapshot get(const std::string& id, uint32_t caller = 0) const;
  std::vector<SessionSnapshot> list(uint32_t caller = 0) const;
  // Frees the session's KV now (or when its running request ends). Returns the bytes freed.
  size_t remove(const std::string& id, uint32_t caller = 0);
  // Evicts sessions idle longer than the TTL; returns how many.
  int expire_idle();
  // Deletes every named session (shutdown).
  void clear();
  // Every named session's committed state (busy ones as of the end of their
  // previous request), for saving.
  SessionExport export_committed() const;
  // Bumped by every change of the committed state (a named session created,
  // deleted, evicted or expired, or a request on one ended having changed it).
  uint64_t generation() const;
  // Called (outside the manager's lock, on the thread that made the change)
  // after every such change. Set it before requests run; empty to remove.
  void set_on_change(std::function<void()> on_change);

  SessionTotals totals() const;
  SessionLimits limits() const;
  // Run-time change (SIGHUP). Shrinking limits evicts idle sessions at the next creation or sweep.
  void set_limits(const SessionLimits& limits);
  // The KV bytes a cache of `max_context` positions is charged.
  size_t reserve_bytes(int max_context) const { return bytes_per_position_ * static_cast<size_t>(max_context); }

 private:
  friend class SessionLease;
  void release(const std::shared_ptr<Session>& s);
  std::shared_ptr<Session> make_session(int max_context, bool ephemeral);
  // Evicts idle named sessions until `bytes` more (and, for a named session,
  // one more session) fit the totals and, for a named session, `owner`'s
  // quota: `owner`'s own least recently used first, then those of uids above
  // their quota. Evicts nothing when that would not be enough, and then says
  // why in *why (the limit and the key that sets it). Caller holds mu_.
  bool make_room(size_t bytes, bool named, uint32_t owner, std::string* why);
  std::string generate_id_locked() const;
  std::shared_ptr<Session> create_named(int max_context, const std::string& id, uint32_t owner,
                                        const SavedSession* restoring);
  size_t remove_impl(const std::string& id, uint32_t caller);
  SessionLease create_ephemeral_impl(const std::shared_ptr<Session>& s, uint32_t owner, bool& evicted);
  void evict_locked(const std::shared_ptr<Session>& victim, const char* why);
  int expire_idle_impl();
  void notify_change() const;

  Backend& backend_;
  // What one position of K/V takes when fully grown (4-byte elements, K and V,
  // every layer). Caches that grow on demand are charged their full size up front.
  size_t bytes_per_position_ = 0;
  mutable std::mutex mu_;
  SessionLimits limits_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;
  size_t kv_bytes_ = 0;     // named + ephemeral + deleted-but-busy
  int ephemeral_ = 0;
  uint64_t evicted_ = 0;
  uint64_t next_id_ = 1;
  uint64_t generation_ = 0;
  std::function<void()> on_change_;
};

// Throws invalid_argument unless id is 1..64 of [A-Za-z0-9_.-].
void validate_session_id(const std::string& id);

}  // namespace qwen3
