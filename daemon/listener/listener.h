// The Unix socket and its accept loop, shared by the transports. gRPC 1.51
// cannot take a listening fd, so the daemon accepts connections itself: each
// peer is checked with SO_PEERCRED (root, or a member of the socket group
// including supplementary groups) and only then handed to the transport (the
// composition root passes gRPC's AddInsecureChannelFromFd). The HTTP listeners
// apply the same admission rules (admits, peer_identity_of, listen_unix_socket). Refused
// peers are logged and their connection closed, as are connections beyond
// max_connections open at once (this socket's own limit: the HTTP listeners
// have theirs). A SIGHUP that narrows the socket group shuts down the open
// connections it no longer admits.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace qwen3 {

struct PeerIdentity {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // the supplementary groups it held when it connected (SO_PEERGROUPS)
};

struct ListenerOptions {
  std::string socket_path;
  std::string socket_group;  // "" or missing: root only
  std::string admin_group;   // "" : root only
  int max_connections = 128; // open at once (grpc_max_connections)
};

class Listener {
 public:
  // Uses the socket systemd passed (socket activation) when there is one,
  // otherwise creates `socket_path` (mode 0660, group socket_group).
  explicit Listener(ListenerOptions options);
  ~Listener();

  // Starts accepting; every admitted connection's fd goes to `serve`, which owns it then.
  void start(std::function<void(int conn)> serve);
  // Stops accepting (the listening socket stays open until destruction).
  void stop();

  // The identity of the peer behind a gRPC peer string ("fd:N"), if known.
  std::optional<PeerIdentity> peer(const std::string& grpc_peer) const;
  const std::string& path() const { return path_; }
  bool activated() const { return activated_; }
  uint64_t rejected() const { return rejected_; }
  uint64_t accepted() const { return accepted_; }
  // Re-reads group membership rules (SIGHUP). Open connections of peers the
  // new socket group no longer admits are shut down (their calls fail, and a
  // reconnect is refused at accept). Returns how many were shut down.
  int set_groups(const std::string& socket_group, const std::string& admin_group);
  // Root, or a member of the admin group in force now (not when it connected).
  bool is_admin(const PeerIdentity& who) const;
  std::string admin_group() const;
  // Root, or a member of the socket group in force now: who may use the
  // daemon's sockets (the HTTP socket applies it too).
  bool admits(const PeerIdentity& who) const;

 private:
  void accept_loop();
  // admits() with mu_ held: the one rule for the accept loop, SIGHUP and HTTP.
  bool admits_locked(const PeerIdentity& who) const;
  // Forgets the connections gRPC has closed (the fd is gone, or is another file now).
  void prune_closed_locked();
  // Primary gid, the groups the peer process holds, or the group database.
  bool member_of(uid_t uid, gid_t gid, const std::vector<gid_t>& held, const std::optional<gid_t>& group) const;

  ListenerOptions options_;
  int fd_ = -1;
  int wake_[2] = {-1, -1};  // self-pipe to stop poll()
  bool activated_ = false;
  bool created_path_ = false;
  std::string path_;
  std::function<void(int)> serve_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> rejected_{0}, accepted_{0};
  mutable std::mutex mu_;
  std::optional<gid_t> socket_gid_, admin_gid_;
  // An accepted connection: who, and its socket's inode, which tells whether
  // the fd still is that connection (gRPC closes it, and the number is reused).
  struct Connection {
    PeerIdentity who;
    ino_t inode = 0;
  };
  std::map<int, Connection> peers_;  // by connection fd
};

// The gid of a group name, if it exists.
std::optional<gid_t> group_id(const std::string& name);

// The process behind a connected Unix socket (SO_PEERCRED, and SO_PEERGROUPS
// unless it is root); nullopt when the kernel does not say.
std::optional<PeerIdentity> peer_identity_of(int conn);
// `path` as a listening Unix stream socket, created with mode 0660 and group
// `gid` (0600, root only, without one); refuses when another process still
// answers there, replaces a stale socket file. Throws qwen3::Error.
int listen_unix_socket(const std::string& path, std::optional<gid_t> gid, const std::string& flag_hint);

}  // namespace qwen3
