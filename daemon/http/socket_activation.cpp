#include "http/socket_activation.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"

namespace qwen3::http {

namespace {

// Out of the way of the slot the gRPC socket moves to.
int keep(int fd) {
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 16);
  if (moved < 0) throw Error("cannot keep the socket systemd passed (fd " + std::to_string(fd) + ")");
  close(fd);
  return moved;
}

}  // namespace

ActivatedSockets take_activated_http_sockets() {
  ActivatedSockets out;
  char** names = nullptr;
  const int n = sd_listen_fds_with_names(0, &names);
  if (n <= 0) return out;
  std::vector<int> grpc;
  for (int i = 0; i < n; ++i) {
    const int fd = SD_LISTEN_FDS_START + i;
    const std::string name = names && names[i] ? names[i] : "";
    if (name == "http") {
      if (sd_is_socket_unix(fd, SOCK_STREAM, 1, nullptr, 0) <= 0)
        throw Error("the socket systemd passed as 'http' is not a listening Unix stream socket (qwen3-bpfd-http.socket)");
      out.unix_fd = keep(fd);
    } else if (name == "http-tcp") {
      if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0)
        throw Error("the socket systemd passed as 'http-tcp' is not a listening stream socket");
      out.tcp_fd = keep(fd);
    } else {
      grpc.push_back(fd);
    }
  }
  if (names) {
    for (int i = 0; i < n; ++i) free(names[i]);
    free(names);
  }
  if (out.unix_fd < 0 && out.tcp_fd < 0) return out;  // nothing of ours: the gRPC listener sees it as it came
  const std::string pid = std::to_string(getpid());
  if (grpc.empty()) {
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_PID");
  } else {
    if (grpc.size() == 1 && grpc[0] != SD_LISTEN_FDS_START) {
      if (dup2(grpc[0], SD_LISTEN_FDS_START) < 0) throw Error("cannot move the gRPC socket systemd passed");
      close(grpc[0]);
    }
    setenv("LISTEN_FDS", std::to_string(grpc.size()).c_str(), 1);
    setenv("LISTEN_PID", pid.c_str(), 1);
  }
  unsetenv("LISTEN_FDNAMES");
  spdlog::info("socket activation: HTTP {}{}{} passed by systemd", out.unix_fd >= 0 ? "Unix socket" : "",
               out.unix_fd >= 0 && out.tcp_fd >= 0 ? " and " : "", out.tcp_fd >= 0 ? "TCP socket" : "");
  return out;
}

}  // namespace qwen3::http
