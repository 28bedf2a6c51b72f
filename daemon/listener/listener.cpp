#include "listener/listener.h"

#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/error.h"

namespace qwen3 {

namespace {

std::string errno_text() { return std::strerror(errno); }

std::string user_name(uid_t uid) {
  if (const passwd* pw = getpwuid(uid)) return pw->pw_name;
  return std::to_string(uid);
}

}  // namespace

std::optional<gid_t> group_id(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (const group* g = getgrnam(name.c_str())) return g->gr_gid;
  return std::nullopt;
}

Listener::Listener(ListenerOptions options) : options_(std::move(options)) {
  set_groups(options_.socket_group, options_.admin_group);
  const int n = sd_listen_fds(0);
  if (n > 1) throw Error("systemd passed " + std::to_string(n) + " sockets; qwen3-bpfd.socket must define exactly one");
  if (n == 1) {
    fd_ = SD_LISTEN_FDS_START;
    if (sd_is_socket_unix(fd_, SOCK_STREAM, 1, nullptr, 0) <= 0)
      throw Error("the socket systemd passed is not a listening Unix stream socket (check ListenStream= in qwen3-bpfd.socket)");
    sockaddr_un addr{};
    socklen_t len = sizeof addr;
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0 && addr.sun_path[0] != '\0') path_ = addr.sun_path;
    activated_ = true;
    spdlog::info("socket activation: accepting on {} passed by systemd", path_.empty() ? "the socket" : path_);
  } else {
    path_ = options_.socket_path;
    std::error_code ec;
    const auto dir = std::filesystem::path(path_).parent_path();
    if (!std::filesystem::exists(dir, ec)) {
      std::filesystem::create_directories(dir, ec);
      if (ec) throw Error("cannot create the socket directory " + dir.string() + ": " + ec.message());
      chmod(dir.c_str(), 0755);
    }
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw Error("socket(AF_UNIX): " + errno_text());
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path_.size() >= sizeof addr.sun_path) throw invalid_argument("socket path too long: " + path_);
    std::strcpy(addr.sun_path, path_.c_str());
    // A stale socket from a previous run: refuse if something still answers on it.
    if (std::filesystem::exists(path_, ec)) {
      int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const bool alive = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      close(probe);
      if (alive) throw Error("another daemon is already listening on " + path_ + " (stop it or use --socket)");
      unlink(path_.c_str());
    }
    // Created with mode 0660 from the start: no window where others can connect.
    const mode_t old = umask(0117);
    const int r = bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    umask(old);
    if (r != 0) throw Error("cannot bind " + path_ + ": " + errno_text());
    created_path_ = true;
    if (socket_gid_) {
      if (chown(path_.c_str(), 0, *socket_gid_) != 0)
        spdlog::warn("cannot give {} to group {}: {}", path_, options_.socket_group, errno_text());
    } else {
      chmod(path_.c_str(), 0600);
    }
    if (listen(fd_, 128) != 0) throw Error("listen on " + path_ + ": " + errno_text());
    spdlog::info("listening on {} (mode {}, group {})", path_, socket_gid_ ? "0660" : "0600",
                 socket_gid_ ? options_.socket_group : "root only");
  }
  if (pipe2(wake_, O_CLOEXEC) != 0) throw Error("pipe: " + errno_text());
}

Listener::~Listener() {
  stop();
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0 && !activated_) close(fd_);
  if (created_path_) unlink(path_.c_str());
  for (int fd : wake_)
    if (fd >= 0) close(fd);
}

int Listener::set_groups(const std::string& socket_group, const std::string& admin_group) {
  std::lock_guard lock(mu_);
  options_.socket_group = socket_group;
  options_.admin_group = admin_group;
  socket_gid_ = group_id(socket_group);
  admin_gid_ = group_id(admin_group);
  if (!socket_group.empty() && !socket_gid_)
    spdlog::warn("group '{}' does not exist: only root may use the socket (create it with "
                 "`groupadd --system {}` or set socket_group)", socket_group, socket_group);
  if (!admin_group.empty() && !admin_gid_)
    spdlog::warn("admin group '{}' does not exist: VerifyProgram/GenerateVerified are root only", admin_group);
  // Access is judged at accept; a connection accepted under the old rules
  // would keep serving its peer. Shut down those the new rules refuse.
  int dropped = 0;
  prune_closed_locked();
  for (auto it = peers_.begin(); it != peers_.end();) {
    const auto& [fd, c] = *it;
    if (admits_locked(c.who)) {
      ++it;
      continue;
    }
    // gRPC owns the fd and closes it once it sees the end of the stream.
    ::shutdown(fd, SHUT_RDWR);
    spdlog::warn("connection of pid {} uid {} ({}) closed: no longer in socket group '{}'", c.who.pid, c.who.uid,
                 user_name(c.who.uid), socket_group);
    ++dropped;
    it = peers_.erase(it);
  }
  return dropped;
}

void Listener::prune_closed_locked() {
  for (auto it = peers_.begin(); it != peers_.end();) {
    struct stat st {};
    const bool same = fstat(it->first, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == it->second.inode;
    it = same ? std::next(it) : peers_.erase(it);  // gRPC closed it; the fd number may be something else now
  }
}

void Listener::start(std::function<void(int conn)> serve) {
  serve_ = std::move(serve);
  thread_ = std::thread([this] { accept_loop(); });
}

void Listener::stop() {
  if (stopping_.exchange(true)) return;
  if (wake_[1] >= 0) {
    const char c = 0;
    [[maybe_unused]] auto n = write(wake_[1], &c, 1);
  }
}

// The groups the peer process holds right now (SO_PEERGROUPS, Linux >= 4.13).
static std::vector<gid_t> peer_groups(int conn) {
  std::vector<gid_t> groups(64);
  socklen_t len = groups.size() * sizeof(gid_t);
  if (getsockopt(conn, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) {
    if (errno != ERANGE) return {};
    groups.resize(len / sizeof(gid_t));
    if (getsockopt(conn, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) return {};
  }
  groups.resize(len / sizeof(gid_t));
  return groups;
}

bool Listener::member_of(uid_t uid, gid_t gid, const std::vector<gid_t>& held,
                         const std::optional<gid_t>& group) const {
  if (!group) return false;
  if (gid == *group) return true;
  for (gid_t g : held)
    if (g == *group) return true;
  // Membership recorded in the group database counts too (getgrouplist).
  const passwd* pw = getpwuid(uid);
  if (!pw) return false;
  int n = 64;
  std::vector<gid_t> groups(n);
  if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) {
    groups.resize(n);
    if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) return false;
  }
  groups.resize(n);
  for (gid_t g : groups)
    if (g == *group) return true;
  return false;
}

void Listener::accept_loop() {
  while (!stopping_) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("poll on the listening socket failed: {}", errno_text());
      return;
    }
    if (stopping_ || (fds[1].revents & POLLIN)) return;
    if (!(fds[0].revents & POLLIN)) continue;
    const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) spdlog::warn("accept: {}", errno_text());
      continue;
    }
    const std::optional<PeerIdentity> who = peer_identity_of(conn);
    if (!who) {
      spdlog::warn("connection refused: cannot read its credentials (SO_PEERCRED: {})", errno_text());
      close(conn);
      ++rejected_;
      continue;
    }
    struct stat st {};
    fstat(conn, &st);
    bool allowed, full = false;
    std::string group;
    {
      // Judged and recorded at once: a SIGHUP in between would miss this connection.
      std::lock_guard lock(mu_);
      allowed = admits_locked(*who);
      if (allowed) {
        peers_.erase(conn);  // an fd number gRPC closed and accept reused
        prune_closed_locked();
        full = static_cast<int>(peers_.size()) >= options_.max_connections;
        if (!full) peers_[conn] = {*who, st.st_ino};
      }
      group = options_.socket_group;
    }
    if (full) {
      spdlog::warn("connection of pid {} uid {} ({}) refused: {} connections open (grpc_max_connections)", who->pid,
                   who->uid, user_name(who->uid), options_.max_connections);
      close(conn);
      ++rejected_;
      continue;
    }
    if (!allowed) {
      spdlog::warn("connection refused: pid {} uid {} ({}) is neither root nor in group '{}'", who->pid, who->uid,
                   user_name(who->uid), group);
      close(conn);
      ++rejected_;
      continue;
    }
    spdlog::debug("connection from pid {} uid {} ({}) accepted", who->pid, who->uid, user_name(who->uid));
    ++accepted_;
    // The transport owns the fd from here on (gRPC closes it; its endpoints expect non-blocking fds).
    serve_(conn);
  }
}

bool Listener::is_admin(const PeerIdentity& who) const {
  if (who.uid == 0) return true;
  std::lock_guard lock(mu_);
  return member_of(who.uid, who.gid, who.groups, admin_gid_);
}

std::string Listener::admin_group() const {
  std::lock_guard lock(mu_);
  return options_.admin_group;
}

std::optional<PeerIdentity> Listener::peer(const std::string& grpc_peer) const {
  // AddInsecureChannelFromFd names the peer "fd:<n>".
  if (grpc_peer.rfind("fd:", 0) != 0) return std::nullopt;
  const int fd = std::atoi(grpc_peer.c_str() + 3);
  std::lock_guard lock(mu_);
  auto it = peers_.find(fd);
  if (it == peers_.end()) return std::nullopt;
  return it->second.who;
}

bool Listener::admits(const PeerIdentity& who) const {
  std::lock_guard lock(mu_);
  return admits_locked(who);
}

bool Listener::admits_locked(const PeerIdentity& who) const {
  return who.uid == 0 || member_of(who.uid, who.gid, who.groups, socket_gid_);
}

std::optional<PeerIdentity> peer_identity_of(int conn) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return std::nullopt;
  return PeerIdentity{cred.pid, cred.uid, cred.gid, cred.uid == 0 ? std::vector<gid_t>{} : peer_groups(conn)};
}

int listen_unix_socket(const std::string& path, std::optional<gid_t> gid, const std::string& flag_hint) {
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Error("cannot create the socket directory " + dir.string() + ": " + ec.message());
    chmod(dir.c_str(), 0755);
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) throw invalid_argument("socket path too long: " + path);
  std::strcpy(addr.sun_path, path.c_str());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error("socket(AF_UNIX): " + errno_text());
  if (std::filesystem::exists(path, ec)) {
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool alive = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(probe);
    if (alive) {
      close(fd);
      throw Error("another process is already listening on " + path + " (stop it or use " + flag_hint + ")");
    }
    unlink(path.c_str());
  }
  const mode_t old = umask(0117);  // 0660 from the start: no window where others can connect
  const int r = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  umask(old);
  if (r != 0) {
    const std::string why = errno_text();
    close(fd);
    throw Error("cannot bind " + path + ": " + why);
  }
  if (gid) {
    if (chown(path.c_str(), 0, *gid) != 0) spdlog::warn("cannot give {} to gid {}: {}", path, *gid, errno_text());
  } else {
    chmod(path.c_str(), 0600);
  }
  if (listen(fd, 128) != 0) {
    const std::string why = errno_text();
    close(fd);
    unlink(path.c_str());
    throw Error("listen on " + path + ": " + why);
  }
  return fd;
}

}  // namespace qwen3
