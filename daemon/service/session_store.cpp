#include "service/session_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "scheduler/scheduler.h"
#include "sessions/session_manager.h"

namespace qwen3 {

int save_sessions(const std::string& path, const SessionManager& sessions) {
  const auto saved = sessions.export_idle();
  std::error_code ec;
  if (saved.empty()) {
    std::filesystem::remove(path, ec);
    return 0;
  }
  nlohmann::json doc = {{"version", 1}, {"sessions", nlohmann::json::array()}};
  for (const auto& s : saved)
    doc["sessions"].push_back({{"id", s.id}, {"max_context", s.max_context}, {"positions", s.positions},
                               {"history", s.history}});
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    spdlog::warn("cannot save sessions to {}: {}", tmp, std::strerror(errno));
    return 0;
  }
  const std::string text = doc.dump();
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    spdlog::warn("cannot save sessions to {}: {}", path, std::strerror(errno));
    std::filesystem::remove(tmp, ec);
    return 0;
  }
  spdlog::info("saved {} session(s) to {}", saved.size(), path);
  return static_cast<int>(saved.size());
}

int restore_sessions(const std::string& path, SessionManager& sessions, Scheduler& scheduler, int vocab_size,
                     const std::function<bool()>& stopping) {
  std::ifstream in(path);
  if (!in) return 0;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    spdlog::warn("ignoring {}: not valid JSON ({})", path, e.what());
    return 0;
  }
  int restored = 0;
  const auto entries = doc.value("sessions", nlohmann::json::array());
  for (const auto& entry : entries) {
    if (stopping()) break;
    std::string id;
    bool created = false;
    try {
      id = entry.at("id").get<std::string>();
      const int max_context = entry.at("max_context").get<int>();
      const int positions = entry.at("positions").get<int>();
      const auto history = entry.at("history").get<std::vector<int32_t>>();
      if (positions < 0 || positions > static_cast<int>(history.size()) || static_cast<int>(history.size()) > max_context)
        throw invalid_argument("inconsistent positions/history/max_context");
      for (int32_t t : history)
        if (t < 0 || t >= vocab_size) throw invalid_argument("token id " + std::to_string(t) + " out of range");
      sessions.create(max_context, id);
      created = true;
      SessionLease lease = sessions.acquire(id);
      if (positions > 0) {
        const std::span<const int32_t> feed(history.data(), positions);
        scheduler.run(*lease->kv, feed, ForwardWants{}, stopping);
      }
      lease->history = history;
      ++restored;
    } catch (const std::exception& e) {
      spdlog::warn("session {} from {} not restored: {}", id.empty() ? "?" : id, path, e.what());
      if (created) {
        try {
          sessions.remove(id);
        } catch (...) {
        }
      }
    }
  }
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (restored > 0) spdlog::info("restored {} session(s) from {}", restored, path);
  return restored;
}

}  // namespace qwen3
