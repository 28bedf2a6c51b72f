#include "sessions/session_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

#include "common/error.h"

namespace qwen3 {

namespace {

std::string mib(size_t bytes) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

SessionSnapshot snapshot_of(const Session& s) {
  SessionSnapshot out;
  out.id = s.id;
  out.positions = s.kv ? s.kv->positions() : 0;
  out.history_tokens = static_cast<int>(s.history.size());
  out.max_context = s.kv ? s.kv->max_context() : 0;
  out.bytes = s.kv_bytes;
  out.created = s.created;
  out.last_used = s.last_used;
  out.busy = s.busy;
  out.owner_uid = s.owner_uid;
  return out;
}

bool visible_to(const Session& s, uint32_t caller) { return caller == 0 || s.owner_uid == caller; }

Error unknown_session(const std::string& id, const char* hint = "") {
  return not_found("unknown session '" + printable(id) + "'" + hint);
}

}  // namespace

void validate_session_id(const std::string& id) {
  if (id.empty() || id.size() > 64)
    throw invalid_argument("session_id must be 1..64 characters (got " + std::to_string(id.size()) + ")");
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) throw invalid_argument("session_id may contain only letters, digits, '_', '-' and '.'");
  }
}

SessionLease& SessionLease::operator=(SessionLease&& o) noexcept {
  if (this != &o) {
    release();
    manager_ = o.manager_;
    session_ = std::move(o.session_);
    o.manager_ = nullptr;
  }
  return *this;
}

void SessionLease::release() {
  if (session_ && manager_) manager_->release(session_);
  session_.reset();
  manager_ = nullptr;
}

SessionManager::SessionManager(Backend& backend, SessionLimits limits) : backend_(backend), limits_(limits) {
  const ModelConfig& c = backend.config();
  bytes_per_position_ = static_cast<size_t>(c.num_hidden_layers) * 2 * static_cast<size_t>(c.kv_dim()) * 4;
}

SessionManager::~SessionManager() { clear(); }


std::string SessionManager::generate_id_locked() const {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  for (;;) {
    std::string id = "s-";
    uint64_t r = rng();
    for (int i = 0; i < 12; ++i) id += hex[(r >> (4 * i)) & 15];
    if (!sessions_.count(id)) return id;
  }
}

std::shared_ptr<Session> SessionManager::make_session(int max_context, bool ephemeral) {
  int cap;
  {
    std::lock_guard lock(mu_);
    cap = limits_.max_context;
    if (max_context == 0) max_context = std::min(limits_.default_context, cap);
  }
  if (max_context < 1)
    throw invalid_argument("max_context must be >= 1 (got " + std::to_string(max_context) + ")");
  if (max_context > cap)
    throw invalid_argument("max_context " + std::to_string(max_context) + " exceeds the configured max_context " +
                           std::to_string(cap) + " (raise max_context in qwen3-bpfd.conf)");
  {
    // Refuse before creating kernel maps that could never fit.
    std::lock_guard lock(mu_);
    if (reserve_bytes(max_context) > limits_.kv_budget_bytes)
      throw resource_exhausted("a KV cache of " + std::to_string(max_context) + " positions needs " +
                               mib(reserve_bytes(max_context)) + ", more than the whole kv_budget_mib (" +
                               mib(limits_.kv_budget_bytes) + "); use a smaller max_context or raise kv_budget_mib");
  }
  auto s = std::make_shared<Session>();
  s->ephemeral = ephemeral;
  // Created outside the lock: for the bpf backend this creates kernel maps.
  s->kv = backend_.create_kv(max_context);
  s->kv_bytes = std::max(s->kv->bytes(), reserve_bytes(max_context));
  s->created = s->last_used = Clock::now();
  return s;
}

namespace {

struct Usage {
  int sessions = 0;
  size_t bytes = 0;
};

}  // namespace

bool SessionManager::make_room(size_t bytes, bool named, uint32_t owner, std::string* why) {
  std::map<uint32_t, Usage> use;
  std::vector<std::shared_ptr<Session>> idle;
  for (auto& [id, s] : sessions_) {
    use[s->owner_uid].sessions += 1;
    use[s->owner_uid].bytes += s->kv_bytes;
    if (!s->busy) idle.push_back(s);
  }
  std::sort(idle.begin(), idle.end(), [](const auto& a, const auto& b) { return a->last_used < b->last_used; });
  // The plan is made on counts first: nothing is evicted in vain.
  int count = static_cast<int>(sessions_.size());
  size_t total = kv_bytes_;
  auto over_quota = [&](const Usage& u) {
    return u.sessions > limits_.max_sessions_per_uid || u.bytes > limits_.kv_budget_bytes_per_uid;
  };
  auto owner_needs = [&] {
    const Usage& u = use[owner];
    return named && (u.sessions + 1 > limits_.max_sessions_per_uid || u.bytes + bytes > limits_.kv_budget_bytes_per_uid);
  };
  auto total_needs = [&] { return total + bytes > limits_.kv_budget_bytes || (named && count + 1 > limits_.max_sessions); };
  std::vector<std::shared_ptr<Session>> victims;
  auto plan = [&](const std::shared_ptr<Session>& s) {
    victims.push_back(s);
    use[s->owner_uid].sessions -= 1;
    use[s->owner_uid].bytes -= s->kv_bytes;
    count -= 1;
    total -= s->kv_bytes;
  };
  for (const auto& s : idle)
    if (s->owner_uid == owner && (owner_needs() || total_needs())) plan(s);
  for (const auto& s : idle)
    if (s->owner_uid != owner && !owner_needs() && total_needs() && over_quota(use[s->owner_uid])) plan(s);
  if (owner_needs()) {
    const Usage& u = use[owner];
    *why = u.sessions + 1 > limits_.max_sessions_per_uid
               ? "session quota of uid " + std::to_string(owner) + " reached: " + std::to_string(u.sessions) +
                     " sessions (max_sessions_per_uid " + std::to_string(limits_.max_sessions_per_uid) +
                     ") and none of them idle to evict; delete one of yours or raise max_sessions_per_uid"
               : "KV quota of uid " + std::to_string(owner) + " exhausted: " + mib(u.bytes) + " held + " + mib(bytes) +
                     " needed > kv_budget_mib_per_uid " + mib(limits_.kv_budget_bytes_per_uid) +
                     " and none of its sessions idle to evict; delete one of yours, use a smaller max_context or raise "
                     "kv_budget_mib_per_uid";
    return false;
  }
  if (total_needs()) {
    *why = named && count + 1 > limits_.max_sessions
               ? "session limit reached: " + std::to_string(sessions_.size()) + " sessions (max_sessions " +
                     std::to_string(limits_.max_sessions) +
                     ") and none that may be evicted (idle, and yours or of a uid above its quota); delete a session "
                     "or raise max_sessions"
               : "KV memory budget exhausted: " + mib(kv_bytes_) + " in use + " + mib(bytes) + " needed > kv_budget_mib " +
                     mib(limits_.kv_budget_bytes) +
                     " and no session that may be evicted (idle, and yours or of a uid above its quota); delete a "
                     "session, use a smaller max_context, retry later or raise kv_budget_mib";
    return false;
  }
  for (const auto& v : victims) evict_locked(v, v->owner_uid == owner ? "its owner's least recently used" : "its owner above quota");
  return true;
}

void SessionManager::evict_locked(const std::shared_ptr<Session>& victim, const char* why) {
  spdlog::info("session {} of uid {} evicted ({}) to make room: frees {}", victim->id, victim->owner_uid, why,
               mib(victim->kv_bytes));
  sessions_.erase(victim->id);
  kv_bytes_ -= victim->kv_bytes;
  ++evicted_;
  ++generation_;
  victim->kv.reset();  // frees the kernel maps; no request holds it (not busy)
}

std::shared_ptr<Session> SessionManager::create_named(int max_context, const std::string& id, uint32_t owner,
                                                      const SavedSession* restoring) {
  if (!id.empty()) validate_session_id(id);
  {
    std::lock_guard lock(mu_);
    if (!id.empty() && sessions_.count(id)) throw Error("session " + id + " already exists", ErrorKind::failed_precondition);
  }
  auto s = make_session(max_context, false);
  std::unique_ptr<KvCache> discard;
  {
    std::lock_guard lock(mu_);
    if (!id.empty() && sessions_.count(id)) {
      discard = std::move(s->kv);
      throw Error("session " + id + " already exists", ErrorKind::failed_precondition);
    }
    if (s->kv_bytes > limits_.kv_budget_bytes) {
      const int positions = s->kv->max_context();
      discard = std::move(s->kv);
      throw resource_exhausted("a session of " + std::to_string(positions) + " positions needs " +
                               mib(s->kv_bytes) + " of KV, more than the whole kv_budget_mib (" +
                               mib(limits_.kv_budget_bytes) + "); ask for a smaller max_context or raise kv_budget_mib");
    }
    if (s->kv_bytes > limits_.kv_budget_bytes_per_uid) {
      const int positions = s->kv->max_context();
      discard = std::move(s->kv);
      throw resource_exhausted("a session of " + std::to_string(positions) + " positions needs " + mib(s->kv_bytes) +
                               " of KV, more than one uid may hold (kv_budget_mib_per_uid " +
                               mib(limits_.kv_budget_bytes_per_uid) + "); ask for a smaller max_context or raise "
                               "kv_budget_mib_per_uid");
    }
    std::string why;
    if (!make_room(s->kv_bytes, /*named=*/true, owner, &why)) {
      discard = std::move(s->kv);
      throw resource_exhausted(why);
    }
    s->id = id.empty() ? generate_id_locked() : id;
    s->owner_uid = owner;
    if (restoring) {
      s->busy = true;
      s->restoring = true;
      s->committed_history = restoring->history;
      s->committed_positions = restoring->positions;
    }
    sessions_[s->id] = s;
    kv_bytes_ += s->kv_bytes;
    ++generation_;
    spdlog::info("session {} {}: {} positions, {} KV, owner uid {}", s->id, restoring ? "being restored" : "created",
                 s->kv->max_context(), mib(s->kv_bytes), owner);
  }
  notify_change();
  return s;
}

SessionSnapshot SessionManager::create(int max_context, const std::string& id, uint32_t owner) {
  auto s = create_named(max_context, id, owner, nullptr);
  std::lock_guard lock(mu_);
  return snapshot_of(*s);
}

SessionLease SessionManager::create_restoring(const SavedSession& saved) {
  validate_session_id(saved.id);
  return SessionLease(this, create_named(saved.max_context, saved.id, saved.owner_uid, &saved));
}

void SessionManager::finish_restore(SessionLease& lease) {
  // Only the lease holder touches `restoring` outside the lock; the lease's
  // release (same thread) reads it under the lock.
  if (lease) lease->restoring = false;
}



SessionLease SessionManager::create_ephemeral(int max_context, uint32_t owner) {
  auto s = make_session(max_context, true);
  bool evicted = false;
  SessionLease lease = create_ephemeral_impl(s, owner, evicted);
  if (evicted) notify_change();  // named sessions were evicted to make room
  return lease;
}

SessionLease SessionManager::create_ephemeral_impl(const std::shared_ptr<Session>& s, uint32_t owner, bool& evicted) {
  std::unique_ptr<KvCache> discard;
  std::lock_guard lock(mu_);
  const uint64_t generation = generation_;
  if (s->kv_bytes > limits_.kv_budget_bytes) {
    discard = std::move(s->kv);
    throw resource_exhausted("this request needs " + mib(s->kv_bytes) + " of KV, more than kv_budget_mib (" +
                             mib(limits_.kv_budget_bytes) + "); use fewer tokens or raise kv_budget_mib");
  }
  std::string why;
  const bool ok = make_room(s->kv_bytes, /*named=*/false, owner, &why);
  evicted = generation_ != generation;
  if (!ok) {
    discard = std::move(s->kv);
    throw resource_exhausted(why);
  }
  s->id = "(ephemeral)";
  s->owner_uid = owner;
  s->busy = true;
  kv_bytes_ += s->kv_bytes;
  ++ephemeral_;
  return SessionLease(this, s);
}

SessionLease SessionManager::acquire(const std::string& id, uint32_t caller) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || !visible_to(*it->second, caller))
    throw unknown_session(id, " (it may have expired or been evicted; create it again)");
  if (it->second->busy)
    throw failed_precondition("session busy: session " + id +
                              " is serving another request; wait for it to finish or use another session");
  it->second->busy = true;
  it->second->last_used = Clock::now();
  return SessionLease(this, it->second);
}

void SessionManager::release(const std::shared_ptr<Session>& s) {
  std::unique_ptr<KvCache> free_later;
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    s->busy = false;
    s->last_used = Clock::now();
    if (s->ephemeral || s->removed) {
      if (s->ephemeral) --ephemeral_;
      kv_bytes_ -= s->kv_bytes;
      free_later = std::move(s->kv);
    } else if (!s->restoring && s->kv) {
      // The request is over: what the session holds now is what a restart brings back.
      const int positions = s->kv->positions();
      if (positions != s->committed_positions || s->history != s->committed_history) {
        s->committed_history = s->history;
        s->committed_positions = positions;
        ++generation_;
        changed = true;
      }
    }
  }
  if (changed) notify_change();
}

SessionSnapshot SessionManager::get(const std::string& id, uint32_t caller) const {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || !visible_to(*it->second, caller)) throw unknown_session(id);
  return snapshot_of(*it->second);
}

std::vector<SessionSnapshot> SessionManager::list(uint32_t caller) const {
  std::lock_guard lock(mu_);
  std::vector<SessionSnapshot> out;
  for (auto& [id, s] : sessions_)
    if (visible_to(*s, caller)) out.push_back(snapshot_of(*s));
  return out;
}

size_t SessionManager::remove(const std::string& id, uint32_t caller) {
  const size_t bytes = remove_impl(id, caller);
  notify_change();
  return bytes;
}

size_t SessionManager::remove_impl(const std::string& id, uint32_t caller) {
  std::unique_ptr<KvCache> free_now;
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || !visible_to(*it->second, caller)) throw unknown_session(id);
  auto s = it->second;
  sessions_.erase(it);
  ++generation_;
  const size_t bytes = s->kv_bytes;
  if (s->busy) {
    s->removed = true;  // its request still runs; the KV goes when the request ends
    spdlog::info("session {} deleted while busy: its KV is freed when the running request ends", id);
  } else {
    kv_bytes_ -= bytes;
    free_now = std::move(s->kv);
    spdlog::info("session {} deleted: frees {}", id, mib(bytes));
  }
  return bytes;
}

int SessionManager::expire_idle() {
  const int n = expire_idle_impl();
  if (n > 0) notify_change();
  return n;
}

int SessionManager::expire_idle_impl() {
  std::vector<std::unique_ptr<KvCache>> free_now;
  std::lock_guard lock(mu_);
  if (limits_.ttl.count() <= 0) return 0;
  const auto now = Clock::now();
  int n = 0;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    auto& s = it->second;
    if (!s->busy && now - s->last_used > limits_.ttl) {
      spdlog::info("session {} expired after {} s idle: frees {}", s->id, limits_.ttl.count(), mib(s->kv_bytes));
      kv_bytes_ -= s->kv_bytes;
      free_now.push_back(std::move(s->kv));
      it = sessions_.erase(it);
      ++evicted_;
      ++generation_;
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

void SessionManager::clear() {
  std::vector<std::unique_ptr<KvCache>> free_now;
  std::lock_guard lock(mu_);
  for (auto& [id, s] : sessions_) {
    if (s->busy) {
      s->removed = true;
    } else {
      kv_bytes_ -= s->kv_bytes;
      free_now.push_back(std::move(s->kv));
    }
  }
  sessions_.clear();
}

SessionExport SessionManager::export_committed() const {
  std::lock_guard lock(mu_);
  SessionExport out;
  out.generation = generation_;
  for (auto& [id, s] : sessions_) {
    if (!s->kv) continue;
    out.sessions.push_back({id, s->kv->max_context(), s->committed_positions, s->committed_history, s->owner_uid});
  }
  return out;
}

uint64_t SessionManager::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

void SessionManager::set_on_change(std::function<void()> on_change) {
  std::lock_guard lock(mu_);
  on_change_ = std::move(on_change);
}

void SessionManager::notify_change() const {
  std::function<void()> f;
  {
    std::lock_guard lock(mu_);
    f = on_change_;
  }
  if (f) f();
}

SessionTotals SessionManager::totals() const {
  std::lock_guard lock(mu_);
  SessionTotals t;
  t.sessions = static_cast<int>(sessions_.size());
  t.ephemeral = ephemeral_;
  for (auto& [id, s] : sessions_) t.busy += s->busy ? 1 : 0;
  t.kv_bytes = kv_bytes_;
  t.evicted = evicted_;
  return t;
}

SessionLimits SessionManager::limits() const {
  std::lock_guard lock(mu_);
  return limits_;
}

void SessionManager::set_limits(const SessionLimits& limits) {
  std::lock_guard lock(mu_);
  limits_ = limits;
}

}  // namespace qwen3
