#include "daemon_client.h"

#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cli_error.h"

namespace qwen3::cli {
namespace {

const std::string kAccessHint = "you must be root or in group qwen3-bpf";

bool caller_may_connect() {
  if (geteuid() == 0) return true;
  struct group* gr = getgrnam(kSocketGroup);
  if (!gr) return false;
  if (getegid() == gr->gr_gid) return true;
  int n = getgroups(0, nullptr);
  std::vector<gid_t> groups(n > 0 ? n : 0);
  if (n > 0 && getgroups(n, groups.data()) == n)
    for (gid_t g : groups)
      if (g == gr->gr_gid) return true;
  return false;
}

// Why a connection to the socket fails; nullopt-like empty string when the
// daemon is reachable (the failure was then the daemon's own answer).
struct Diagnosis {
  int exit_code = 0;
  std::string message;
};

Diagnosis diagnose_socket(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == EACCES)
      return {kExitPermission, "permission denied: cannot reach " + path + ": " + kAccessHint};
    return {kExitNoDaemon, "qwen3-bpfd is not running: cannot connect to " + path + " (" +
                               std::strerror(errno) + ")" + start_hint(path, systemd_running())};
  }
  if (!S_ISSOCK(st.st_mode))
    return {kExitNoDaemon, "cannot connect to " + path + ": it is not a socket (check --socket / QWEN3_BPF_SOCKET)"};
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path))
    return {kExitUsage, "socket path too long: " + path};
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {kExitNoDaemon, std::string("cannot create a Unix socket: ") + std::strerror(errno)};
  Diagnosis d;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    if (err == EACCES || err == EPERM)
      d = {kExitPermission, "permission denied: cannot connect to " + path + ": " + kAccessHint};
    else
      d = {kExitNoDaemon, "qwen3-bpfd is not running: cannot connect to " + path + " (" + std::strerror(err) +
                              ")" + start_hint(path, systemd_running())};
    close(fd);
    return d;
  }
  // Connected. The daemon closes connections that fail its credential check
  // right after accepting them; a healthy server keeps the connection open.
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 1500) > 0) {
    char byte;
    ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) {
      if (!caller_may_connect())
        d = {kExitPermission, "permission denied: qwen3-bpfd closed the connection (credential check): " + kAccessHint};
      else
        d = {kExitNoDaemon, "qwen3-bpfd closed the connection on " + path + " (is it stopping? see " +
                                (systemd_running() ? "journalctl -u qwen3-bpfd" : "its log") + ")"};
    }
  }
  close(fd);
  return d;
}

}  // namespace

bool systemd_running() {
  struct stat st {};
  return stat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
}

std::string start_hint(const std::string& socket_path, bool systemd) {
  if (systemd && socket_path == kDefaultSocket) return "; start it with: systemctl start qwen3-bpfd";
  std::string cmd = "qwen3-bpfd";
  if (socket_path != kDefaultSocket) cmd += " --socket " + socket_path;
  return "; start it (as root; it stays in the foreground) with: " + cmd + " [--model DIR]";
}

std::string resolve_socket_path(const std::string& from_flag) {
  if (!from_flag.empty()) return from_flag;
  if (const char* env = std::getenv("QWEN3_BPF_SOCKET"); env && *env) return env;
  return kDefaultSocket;
}

DaemonClient::DaemonClient(std::string socket_path) : socket_path_(std::move(socket_path)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 * 1024 * 1024);
  args.SetMaxSendMessageSize(64 * 1024 * 1024);
  // Reconnect quickly when the daemon is being (re)started by socket
  // activation. (Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC 1.51 also uses it
  // as the connect timeout, and a daemon busy loading needs longer than that.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  channel_ = grpc::CreateCustomChannel("unix:" + socket_path_, grpc::InsecureChannelCredentials(), args);
  stub_ = qwen3bpf::v1::Qwen3Bpf::NewStub(channel_);
}

void DaemonClient::check(const grpc::Status& status, const std::string& what) const {
  if (status.ok()) return;
  throw error_for(status, what);
}

CliError DaemonClient::error_for(const grpc::Status& status, const std::string& what) const {
  const std::string detail = status.error_message();
  std::string code = status_code_name(status.error_code());
  for (auto& c : code) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE: {
      Diagnosis d = diagnose_socket(socket_path_);
      if (d.exit_code != 0) return CliError(d.message, d.exit_code);
      return CliError("qwen3-bpfd is not available for " + what + ": " + detail, kExitUnavailable, code);
    }
    case grpc::StatusCode::DEADLINE_EXCEEDED: {
      // With wait_for_ready a vanished daemon shows up as a deadline.
      Diagnosis d = diagnose_socket(socket_path_);
      if (d.exit_code != 0) return CliError(d.message, d.exit_code);
      return CliError(what + " timed out: " + detail, kExitFailed, code);
    }
    case grpc::StatusCode::PERMISSION_DENIED:
      return CliError("permission denied: " + detail, kExitPermission, code);
    case grpc::StatusCode::CANCELLED:
      return CliError(what + " cancelled", kExitInterrupted, code);
    case grpc::StatusCode::INVALID_ARGUMENT:
      // The request itself was wrong (a limit, an id outside the vocabulary):
      // the same class as a bad command line.
      return CliError(what + " failed (INVALID_ARGUMENT): " + detail, kExitUsage, code);
    default:
      return CliError(what + " failed (" + status_code_name(status.error_code()) + "): " + detail, kExitFailed, code);
  }
}

const char* status_code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "ERROR";
  }
}

}  // namespace qwen3::cli
