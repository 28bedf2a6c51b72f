// Socket activation with more than one socket: systemd passes the gRPC socket
// (qwen3-bpfd.socket) and the HTTP ones (qwen3-bpfd-http.socket, named by
// FileDescriptorName= "http" for the Unix socket and "http-tcp" for a TCP one).
#pragma once

namespace qwen3::http {

struct ActivatedSockets {
  int unix_fd = -1;
  int tcp_fd = -1;
};

// Takes the HTTP sockets out of what systemd passed and leaves the gRPC socket
// alone at SD_LISTEN_FDS_START with LISTEN_FDS=1, as the gRPC listener
// expects it. Call before the gRPC listener is made.
ActivatedSockets take_activated_http_sockets();

}  // namespace qwen3::http
