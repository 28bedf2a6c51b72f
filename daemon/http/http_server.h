// The HTTP/1.1 transport of the OpenAI-compatible API (Boost.Beast parses and
// serializes): a Unix socket with the gRPC socket's mode, group and
// SO_PEERCRED check, and optionally a loopback TCP listener that requires a
// bearer token. One thread per connection. The listeners are apart: each has
// its own accept thread and its own connection limit (max_connections for the
// Unix socket, max_connections for TCP clients that showed the token, and
// max_unauthenticated for TCP connections that have not yet), so a flood on
// one never refuses a client of another. A TCP connection's first request head
// must arrive within auth_timeout; after that a request's head and body must
// arrive within header_timeout (408 otherwise, whatever `Expect` says), idle
// keep-alive connections close after idle_timeout, bodies above max_body_bytes
// get 413. An answer that ends a connection is followed by a lingering close:
// the rest of what the client sends is read and discarded, for a bounded time
// and byte count, so that it reads the answer instead of a reset. The whole
// request is read before any inference work, so a slow client holds only its
// own connection thread, never the engine.
#pragma once

#include <boost/beast/http.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "listener/listener.h"

namespace qwen3::http {

class FdStream;
using Request = boost::beast::http::request<boost::beast::http::string_body>;

// The uid TCP clients own sessions as: one no local account has.
inline constexpr uint32_t kTcpClientUid = 0xFFFFFFFEu;

// One request and the way back to its client.
class Exchange {
 public:
  Exchange(FdStream& stream, const Request& request, uint32_t caller_uid, std::chrono::milliseconds write_timeout);

  const Request& request() const { return request_; }
  std::string_view path() const { return path_; }
  uint32_t caller_uid() const { return caller_uid_; }
  // The client closed its end (checked without blocking).
  bool client_gone() const;

  // A whole response. False when the client cannot be written to.
  bool respond(int status, std::string_view content_type, const std::string& body);
  // A chunked response, written piece by piece.
  bool begin_stream(int status, std::string_view content_type);
  bool write(std::string_view data);
  bool end_stream();

  int status() const { return status_; }
  bool keep_alive() const { return keep_alive_; }

 private:
  FdStream& stream_;
  const Request& request_;
  std::string path_;
  uint32_t caller_uid_;
  std::chrono::milliseconds write_timeout_;
  int status_ = 0;
  bool keep_alive_ = true;
  bool streaming_ = false;
};

struct HttpServerOptions {
  std::string unix_path;     // "" : no Unix socket (unless activated_unix_fd)
  int activated_unix_fd = -1;
  std::string tcp_listen;    // "" : none (unless activated_tcp_fd)
  int activated_tcp_fd = -1;
  std::string token;         // required from TCP clients
  std::string socket_group;
  size_t max_body_bytes = 4 << 20;
  std::chrono::seconds header_timeout{10};
  std::chrono::seconds idle_timeout{60};
  std::chrono::seconds write_timeout{60};
  int max_connections = 64;      // per listener: Unix socket, authenticated TCP
  int max_unauthenticated = 16;  // TCP connections before their first request head proved the token
  std::chrono::milliseconds auth_timeout{3000};  // for that first head (capped by header_timeout)
  std::chrono::milliseconds linger_time{5000};   // lingering close: at most this long,
  size_t linger_bytes = size_t{64} << 20;        // and at most this many bytes discarded
};

// Called for every well-formed, authorized request; must answer through the exchange.
using Handler = std::function<void(Exchange&)>;
// Called for every answered request (the path's route label and the status), also for transport errors.
using RequestObserver = std::function<void(std::string_view path, int status)>;

class HttpServer {
 public:
  // Creates the sockets (throws qwen3::Error). `peers` decides who may connect to the Unix socket.
  HttpServer(HttpServerOptions options, const Listener& peers, Handler handler, RequestObserver observer);
  ~HttpServer();

  void start();
  // Stops accepting, closes idle connections, waits up to `grace` for running requests.
  void stop(std::chrono::milliseconds grace);

  int connections() const { return connections_; }
  // Open connections of one kind (the limit each has its own).
  int unix_connections() const { return unix_.open; }
  int tcp_connections() const { return tcp_.open; }
  int unauthenticated_connections() const { return pending_.open; }
  uint64_t rejected() const { return rejected_; }
  const std::string& unix_path() const { return unix_path_; }
  int tcp_port() const { return tcp_port_; }

 private:
  // Open connections of one kind against their limit.
  struct Slots {
    const char* what;   // for messages: the key that sets the limit
    int limit = 0;
    std::atomic<int> open{0};
    // Refusals logged at most once a second (a flood must not flood the log); its accept thread's own.
    std::chrono::steady_clock::time_point last_warning{};
    uint64_t refused = 0;
  };
  // Counts a refusal; how many to report when a warning is due now, else 0.
  uint64_t warn_now(Slots& slots);
  void accept_loop(int listen_fd, bool tcp);
  void accept_unix(int conn);
  void accept_tcp(int conn);
  // Serves `conn` on a thread of its own, which holds a slot of `slot` (taken) until it ends.
  void spawn(int conn, uint32_t uid, bool tcp, Slots& slot);
  // Takes a slot of `slots` if one is free.
  bool take(Slots& slots);
  // Moves a connection from the slot it holds to one of `to`, if one is free.
  bool move_slot(Slots*& held, Slots& to);
  void serve_connection(int fd, uint32_t uid, bool tcp, Slots*& held);
  void refuse(int fd, int status, const std::string& message, bool wait_for_client);

  HttpServerOptions options_;
  const Listener& peers_;
  Handler handler_;
  RequestObserver observer_;
  int unix_fd_ = -1, tcp_fd_ = -1;
  bool created_unix_path_ = false;
  std::string unix_path_;
  int tcp_port_ = 0;
  int wake_[2] = {-1, -1};
  std::thread unix_acceptor_, tcp_acceptor_;
  Slots unix_{"http_max_connections"}, tcp_{"http_max_connections"}, pending_{"http_max_unauthenticated"};
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::atomic<uint64_t> rejected_{0};
  std::mutex mu_;
  std::condition_variable idle_;
  std::vector<int> open_fds_;
};

// Lingering close: shuts down the sending side (the client sees the answer's
// end), then reads and discards what the client still sends until it closes,
// `idle` passes without data, `total` passes or `max_bytes` were read.
void linger_close(int fd, std::chrono::milliseconds total, std::chrono::milliseconds idle, size_t max_bytes);

// The metric label of a request path: the known routes, everything else "other".
std::string route_label(std::string_view path);

}  // namespace qwen3::http
