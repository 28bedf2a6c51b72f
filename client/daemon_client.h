// The connection to qwen3-bpfd: a gRPC channel on its Unix socket, and the
// translation of failures into messages a user can act on, with exit codes
// (daemon not running, permission denied, still loading, request failed).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "cli_error.h"
#include "qwen3bpf/v1/qwen3bpf.grpc.pb.h"

namespace qwen3::cli {

constexpr const char* kDefaultSocket = "/run/qwen3-bpfd/qwen3-bpfd.sock";
constexpr const char* kSocketGroup = "qwen3-bpf";

// --socket, else $QWEN3_BPF_SOCKET, else the default path.
std::string resolve_socket_path(const std::string& from_flag);

class DaemonClient {
 public:
  explicit DaemonClient(std::string socket_path);

  qwen3bpf::v1::Qwen3Bpf::Stub& stub() { return *stub_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  const std::string& socket_path() const { return socket_path_; }

  // Throws CliError for a non-OK status; `what` names the request ("generate").
  void check(const grpc::Status& status, const std::string& what) const;
  // The CliError for a non-OK status (UNAVAILABLE is diagnosed by probing the
  // socket: missing, refused, access denied or closed by the credential check).
  CliError error_for(const grpc::Status& status, const std::string& what) const;

 private:
  std::string socket_path_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<qwen3bpf::v1::Qwen3Bpf::Stub> stub_;
};

// "UNAVAILABLE", "NOT_FOUND", ...
const char* status_code_name(grpc::StatusCode code);

// How to start the daemon, for the "not running" message: systemctl only when
// systemd runs (and serves the default socket); otherwise qwen3-bpfd itself,
// on the socket that was asked for.
std::string start_hint(const std::string& socket_path, bool systemd_running);
bool systemd_running();

}  // namespace qwen3::cli
