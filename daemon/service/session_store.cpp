#include "service/session_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "scheduler/scheduler.h"

namespace qwen3 {

namespace {

using nlohmann::json;

std::string errno_text() { return std::strerror(errno); }

// Writes all of `text` to `fd`.
bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// An integer member of `entry` in [lo, hi]; throws a message naming the key.
int64_t int_member(const json& entry, const char* key, int64_t lo, int64_t hi) {
  const auto it = entry.find(key);
  if (it == entry.end()) throw invalid_argument(std::string("no \"") + key + "\"");
  if (!it->is_number_integer()) throw invalid_argument(std::string("\"") + key + "\" is not an integer");
  int64_t v;
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw invalid_argument(std::string("\"") + key + "\" out of range");
    v = static_cast<int64_t>(u);
  } else {
    v = it->get<int64_t>();
  }
  if (v < lo || v > hi)
    throw invalid_argument(std::string("\"") + key + "\" = " + std::to_string(v) + " is outside [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

SavedSession parse_entry(const json& entry, int vocab_size) {
  if (!entry.is_object()) throw invalid_argument(std::string("the entry is a JSON ") + entry.type_name() + ", not an object");
  SavedSession s;
  const auto id = entry.find("id");
  if (id == entry.end() || !id->is_string()) throw invalid_argument("no string \"id\"");
  s.id = id->get<std::string>();
  validate_session_id(s.id);
  s.max_context = static_cast<int>(int_member(entry, "max_context", 1, std::numeric_limits<int>::max()));
  s.positions = static_cast<int>(int_member(entry, "positions", 0, s.max_context));
  // Files of version 1 have no owner: root's then (the safe choice).
  s.owner_uid = entry.contains("owner_uid")
                    ? static_cast<uint32_t>(int_member(entry, "owner_uid", 0, std::numeric_limits<uint32_t>::max()))
                    : 0;
  const auto history = entry.find("history");
  if (history == entry.end() || !history->is_array()) throw invalid_argument("no \"history\" array");
  if (history->size() > static_cast<size_t>(s.max_context))
    throw invalid_argument("history of " + std::to_string(history->size()) + " tokens exceeds max_context " +
                           std::to_string(s.max_context));
  s.history.reserve(history->size());
  for (const auto& t : *history) {
    if (!t.is_number_integer()) throw invalid_argument("a history entry is not an integer");
    const bool in_range = t.is_number_unsigned() ? t.get<uint64_t>() < static_cast<uint64_t>(vocab_size)
                                                 : t.get<int64_t>() >= 0 && t.get<int64_t>() < vocab_size;
    if (!in_range) throw invalid_argument("token id " + t.dump() + " out of range");
    s.history.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  if (s.positions > static_cast<int>(s.history.size()))
    throw invalid_argument("positions " + std::to_string(s.positions) + " > history length " +
                           std::to_string(s.history.size()));
  return s;
}

}  // namespace

bool SessionStore::save(const SessionManager& sessions) {
  std::lock_guard lock(mu_);
  const SessionExport state = sessions.export_committed();
  if (wrote_once_ && state.generation <= written_) return true;  // a concurrent caller wrote this (or newer)
  json doc = {{"version", 2}, {"sessions", json::array()}};
  for (const auto& s : state.sessions)
    doc["sessions"].push_back({{"id", s.id},
                               {"owner_uid", s.owner_uid},
                               {"max_context", s.max_context},
                               {"positions", s.positions},
                               {"history", s.history}});
  const std::filesystem::path file(path_);
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  const std::string tmp = path_ + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    spdlog::warn("cannot save sessions to {}: {}", tmp, errno_text());
    return false;
  }
  const bool ok = write_all(fd, doc.dump()) && ::fsync(fd) == 0;
  const int saved_errno = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path_.c_str()) != 0) {
    if (ok) errno = saved_errno;
    spdlog::warn("cannot save sessions to {}: {}", path_, errno_text());
    std::filesystem::remove(tmp, ec);
    return false;
  }
  // The rename itself is durable only once the directory is.
  const std::string dir = file.parent_path().empty() ? "." : file.parent_path().string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    if (::fsync(dfd) != 0) spdlog::warn("fsync of {}: {}", dir, errno_text());
    ::close(dfd);
  }
  written_ = state.generation;
  wrote_once_ = true;
  spdlog::debug("saved {} session(s) to {}", state.sessions.size(), path_);
  return true;
}

std::string SessionStore::unused_name(const std::string& suffix) const {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  std::string target = path_ + suffix + "-" + std::to_string(now);
  std::error_code ec;
  for (int n = 1; std::filesystem::exists(target, ec); ++n)
    target = path_ + suffix + "-" + std::to_string(now) + "-" + std::to_string(n);
  return target;
}

void SessionStore::keep_copy(const std::string& why) {
  if (!moved_aside_.empty()) return;  // the whole file is kept there already
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) return;
  const std::string target = unused_name(".dropped");
  std::filesystem::copy_file(path_, target, ec);
  if (ec) {
    spdlog::warn("{}: {}; cannot keep a copy in {} ({}): the next save drops them", path_, why, target, ec.message());
    return;
  }
  std::filesystem::permissions(target, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  spdlog::warn("{}: {}; the file as it was is kept in {}", path_, why, target);
}

void SessionStore::move_aside(const std::string& why) {
  const std::string target = unused_name(".bad");
  std::error_code ec;
  if (::rename(path_.c_str(), target.c_str()) == 0) {
    moved_aside_ = target;
    spdlog::warn("{}: {}; moved aside to {}", path_, why, target);
  } else {
    spdlog::warn("{}: {}; cannot move it aside to {} ({}), removing it", path_, why, target, errno_text());
    std::filesystem::remove(path_, ec);
  }
}

std::vector<SavedSession> SessionStore::load(int vocab_size) {
  std::vector<SavedSession> out;
  std::string text;
  {
    std::ifstream in(path_, std::ios::binary);
    if (!in) return out;
    std::ostringstream buf;
    buf << in.rdbuf();
    text = buf.str();
  }
  json doc;
  try {
    doc = json::parse(text);
  } catch (const std::exception& e) {
    move_aside(std::string("not valid JSON (") + e.what() + ")");
    return out;
  }
  if (!doc.is_object()) {
    move_aside(std::string("a JSON ") + doc.type_name() + ", not an object with a \"sessions\" array");
    return out;
  }
  const auto list = doc.find("sessions");
  if (list == doc.end() || !list->is_array()) {
    move_aside(list == doc.end() ? "no \"sessions\" member"
                                 : std::string("\"sessions\" is a JSON ") + list->type_name() + ", not an array");
    return out;
  }
  int bad = 0;
  for (size_t i = 0; i < list->size(); ++i) {
    try {
      out.push_back(parse_entry((*list)[i], vocab_size));
    } catch (const std::exception& e) {
      ++bad;
      spdlog::warn("{}: session entry {} skipped: {}", path_, i, e.what());
    }
  }
  if (bad > 0) move_aside(std::to_string(bad) + " broken session entr" + (bad == 1 ? "y" : "ies"));
  return out;
}

std::vector<PendingRestore> begin_restore(SessionStore& store, SessionManager& sessions, int vocab_size) {
  std::vector<PendingRestore> pending;
  int dropped = 0;
  for (auto& s : store.load(vocab_size)) {
    try {
      SessionLease lease = sessions.create_restoring(s);
      pending.push_back({std::move(s), std::move(lease)});
    } catch (const std::exception& e) {
      ++dropped;
      spdlog::warn("session {} from {} not restored: {}", printable(s.id), store.path(), e.what());
    }
  }
  // The next save rewrites the file without them: keep it as it was.
  if (dropped > 0)
    store.keep_copy(std::to_string(dropped) + " saved session" + (dropped == 1 ? "" : "s") + " could not be restored");
  return pending;
}

int finish_restore(std::vector<PendingRestore>& pending, const std::string& from, SessionManager& sessions,
                   Scheduler& scheduler, const std::function<bool()>& stopping) {
  int restored = 0;
  for (auto& [s, lease] : pending) {
    if (stopping()) break;  // the rest stay committed as saved: the next start restores them
    try {
      if (s.positions > 0) {
        const std::span<const int32_t> feed(s.history.data(), s.positions);
        scheduler.run(*lease->kv, feed, ForwardWants{}, stopping);
      }
      lease->history = s.history;
      SessionManager::finish_restore(lease);
      lease.release();  // commits the (unchanged) state
      ++restored;
    } catch (const std::exception& e) {
      const auto* err = dynamic_cast<const Error*>(&e);
      if (err && err->kind() == ErrorKind::unavailable && stopping()) break;  // kept as saved, like the rest
      spdlog::warn("session {} from {} not restored: {}", s.id, from, e.what());
      lease.release();
      try {
        sessions.remove(s.id);
      } catch (...) {
      }
    }
  }
  pending.clear();  // leases of sessions not recomputed end without committing anything
  if (restored > 0) spdlog::info("restored {} session(s) from {}", restored, from);
  return restored;
}

int restore_sessions(SessionStore& store, SessionManager& sessions, Scheduler& scheduler, int vocab_size,
                     const std::function<bool()>& stopping) {
  auto pending = begin_restore(store, sessions, vocab_size);
  store.save(sessions);  // the file now says exactly what the table holds (broken entries dropped)
  return finish_restore(pending, store.path(), sessions, scheduler, stopping);
}

void SessionPersistence::start(SessionManager& sessions, Scheduler& scheduler, int vocab_size,
                               std::function<bool()> stopping) {
  sessions_ = &sessions;
  // Read the file before anything may overwrite it; from then on every change is saved.
  auto pending = std::make_shared<std::vector<PendingRestore>>(begin_restore(store_, sessions, vocab_size));
  sessions.set_on_change([this, s = &sessions] { store_.save(*s); });
  store_.save(sessions);
  restorer_ = std::thread([this, pending, &scheduler, stopping = std::move(stopping)] {
    finish_restore(*pending, store_.path(), *sessions_, scheduler, stopping);
  });
}

void SessionPersistence::stop() {
  if (restorer_.joinable()) restorer_.join();
  if (!sessions_) return;
  sessions_->set_on_change({});
  if (store_.save(*sessions_))
    spdlog::info("saved {} session(s) to {}", sessions_->export_committed().sessions.size(), store_.path());
  sessions_ = nullptr;
}

}  // namespace qwen3
