#include "http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/error.h"
#include "http/fd_stream.h"
#include "service/config.h"

namespace qwen3::http {

namespace beast_http = boost::beast::http;
using boost::system::error_code;

namespace {

std::string errno_text() { return std::strerror(errno); }

// The OpenAI error body, for errors found before a handler runs.
std::string error_json(const std::string& message, const char* type, const char* code) {
  std::string escaped;
  for (char c : message) {
    if (c == '"' || c == '\\') escaped += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    escaped += c;
  }
  return std::string("{\"error\":{\"message\":\"") + escaped + "\",\"type\":\"" + type + "\",\"param\":null,\"code\":" +
         (code ? std::string("\"") + code + "\"" : std::string("null")) + "}}\n";
}

// Constant time in the token's length: the comparison does not tell how much matched.
bool same_token(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

int listen_tcp(const std::string& spec) {
  const LoopbackAddress a = parse_loopback_address(spec, "http_listen");
  const bool v6 = a.host == "::1";
  const int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error("socket(TCP): " + errno_text());
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int r;
  if (v6) {
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_port = htons(static_cast<uint16_t>(a.port));
    addr.sin6_addr = in6addr_loopback;
    r = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(a.port));
    if (inet_pton(AF_INET, a.host.c_str(), &addr.sin_addr) != 1) addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    r = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  if (r != 0 || listen(fd, 128) != 0) {
    const std::string why = errno_text();
    close(fd);
    throw Error("cannot listen on " + spec + " (http_listen): " + why);
  }
  return fd;
}

// "3 s", "2.5 s".
std::string seconds_text(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " s";
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

int bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

}  // namespace

std::string route_label(std::string_view path) {
  for (const char* known : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"})
    if (path == known) return known;
  if (path.substr(0, 12) == "/v1/sessions") return "/v1/sessions";
  return "other";
}

Exchange::Exchange(FdStream& stream, const Request& request, uint32_t caller_uid, std::chrono::milliseconds write_timeout)
    : stream_(stream), request_(request), caller_uid_(caller_uid), write_timeout_(write_timeout) {
  const std::string_view target(request.target().data(), request.target().size());
  path_ = std::string(target.substr(0, target.find('?')));
  keep_alive_ = request.keep_alive();
}

bool Exchange::client_gone() const { return stream_.peer_gone(); }

bool Exchange::respond(int status, std::string_view content_type, const std::string& body) {
  status_ = status;
  beast_http::response<beast_http::string_body> res{static_cast<beast_http::status>(status), request_.version()};
  res.set(beast_http::field::server, "qwen3-bpfd");
  res.set(beast_http::field::content_type, boost::beast::string_view(content_type.data(), content_type.size()));
  res.keep_alive(keep_alive_);
  res.body() = body;
  res.prepare_payload();
  stream_.expires_after(write_timeout_);
  error_code ec;
  beast_http::write(stream_, res, ec);
  if (ec) keep_alive_ = false;
  return !ec;
}

bool Exchange::begin_stream(int status, std::string_view content_type) {
  status_ = status;
  streaming_ = true;
  beast_http::response<beast_http::empty_body> res{static_cast<beast_http::status>(status), request_.version()};
  res.set(beast_http::field::server, "qwen3-bpfd");
  res.set(beast_http::field::content_type, boost::beast::string_view(content_type.data(), content_type.size()));
  res.set(beast_http::field::cache_control, "no-cache");
  res.keep_alive(keep_alive_);
  res.chunked(true);
  beast_http::response_serializer<beast_http::empty_body> sr{res};
  stream_.expires_after(write_timeout_);
  error_code ec;
  beast_http::write_header(stream_, sr, ec);
  if (ec) keep_alive_ = false;
  return !ec;
}

bool Exchange::write(std::string_view data) {
  if (data.empty()) return true;
  stream_.expires_after(write_timeout_);
  error_code ec;
  boost::asio::write(stream_, beast_http::make_chunk(boost::asio::buffer(data.data(), data.size())), ec);
  if (ec) keep_alive_ = false;
  return !ec;
}

bool Exchange::end_stream() {
  stream_.expires_after(write_timeout_);
  error_code ec;
  boost::asio::write(stream_, beast_http::make_chunk_last(), ec);
  if (ec) keep_alive_ = false;
  return !ec;
}

HttpServer::HttpServer(HttpServerOptions options, const Listener& peers, Handler handler, RequestObserver observer)
    : options_(std::move(options)), peers_(peers), handler_(std::move(handler)), observer_(std::move(observer)) {
  unix_.limit = tcp_.limit = options_.max_connections;
  pending_.limit = options_.max_unauthenticated;
  if (options_.activated_unix_fd >= 0) {
    unix_fd_ = options_.activated_unix_fd;
    spdlog::info("HTTP API: accepting on the Unix socket systemd passed");
  } else if (!options_.unix_path.empty()) {
    unix_fd_ = listen_unix_socket(options_.unix_path, group_id(options_.socket_group), "--http-socket");
    created_unix_path_ = true;
    unix_path_ = options_.unix_path;
    spdlog::info("HTTP API: listening on {} (mode {}, group {})", unix_path_,
                 group_id(options_.socket_group) ? "0660" : "0600",
                 group_id(options_.socket_group) ? options_.socket_group : "root only");
  }
  try {
    if (options_.activated_tcp_fd >= 0) tcp_fd_ = options_.activated_tcp_fd;
    else if (!options_.tcp_listen.empty()) tcp_fd_ = listen_tcp(options_.tcp_listen);
    if (tcp_fd_ >= 0) {
      if (options_.token.empty()) throw invalid_argument("the HTTP TCP listener needs a token (http_token_file)");
      tcp_port_ = bound_port(tcp_fd_);
      spdlog::info("HTTP API: listening on loopback TCP port {} (bearer token required)", tcp_port_);
    }
    if (pipe2(wake_, O_CLOEXEC) != 0) throw Error("pipe: " + errno_text());
  } catch (...) {
    if (unix_fd_ >= 0 && options_.activated_unix_fd < 0) close(unix_fd_);
    if (created_unix_path_) unlink(unix_path_.c_str());
    throw;
  }
}

HttpServer::~HttpServer() {
  stop(std::chrono::milliseconds(0));
  if (unix_fd_ >= 0) close(unix_fd_);
  if (tcp_fd_ >= 0) close(tcp_fd_);
  if (created_unix_path_) unlink(unix_path_.c_str());
  for (int fd : wake_)
    if (fd >= 0) close(fd);
}

void HttpServer::start() {
  if (unix_fd_ >= 0) unix_acceptor_ = std::thread([this] { accept_loop(unix_fd_, false); });
  if (tcp_fd_ >= 0) tcp_acceptor_ = std::thread([this] { accept_loop(tcp_fd_, true); });
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  if (!stopping_.exchange(true) && wake_[1] >= 0) {
    const char c = 0;
    [[maybe_unused]] auto n = ::write(wake_[1], &c, 1);
  }
  if (unix_acceptor_.joinable()) unix_acceptor_.join();
  if (tcp_acceptor_.joinable()) tcp_acceptor_.join();
  std::unique_lock lock(mu_);
  idle_.wait_for(lock, grace, [&] { return connections_ == 0; });
  // Whatever still runs is woken by its socket's end (reads fail, writes fail, client_gone is true).
  for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
  idle_.wait(lock, [&] { return connections_ == 0; });
}

void linger_close(int fd, std::chrono::milliseconds total, std::chrono::milliseconds idle, size_t max_bytes) {
  shutdown(fd, SHUT_WR);
  const auto end = FdStream::Clock::now() + total;
  FdStream s(fd);
  char sink[16 * 1024];
  size_t discarded = 0;
  while (discarded < max_bytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - FdStream::Clock::now());
    if (left.count() <= 0 || !s.wait_readable(std::min(left, idle))) break;
    const ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) break;  // the client closed, or reset
    if (n > 0) discarded += static_cast<size_t>(n);
  }
}

void HttpServer::refuse(int fd, int status, const std::string& message, bool wait_for_client) {
  ++rejected_;
  const std::string body = error_json(message, status == 503 ? "server_error" : "invalid_request_error", nullptr);
  const std::string answer = "HTTP/1.1 " + std::to_string(status) + (status == 503 ? " Service Unavailable" : " Forbidden") +
                             "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\n\r\n" + body;
  char sink[16 * 1024];
  if (wait_for_client) {
    // Read what the client sent first (briefly): closing a socket with unread
    // data resets it, and the client would see a reset instead of the answer.
    FdStream s(fd);
    if (s.wait_readable(std::chrono::milliseconds(50))) [[maybe_unused]] auto n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    s.expires_after(std::chrono::milliseconds(200));
    error_code ec;
    boost::asio::write(s, boost::asio::buffer(answer), ec);
    linger_close(fd, std::chrono::milliseconds(50), std::chrono::milliseconds(50), sizeof sink);
  } else {
    // Never waits: a flood is refused as fast as it arrives (the answer fits the socket buffer).
    [[maybe_unused]] auto r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    [[maybe_unused]] auto w = send(fd, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
  }
  close(fd);
  if (observer_) observer_("", status);
}

bool HttpServer::move_slot(Slots*& held, Slots& to) {
  std::lock_guard lock(mu_);
  if (to.open >= to.limit) return false;
  --held->open;
  ++to.open;
  held = &to;
  return true;
}

uint64_t HttpServer::warn_now(Slots& slots) {
  ++slots.refused;
  const auto now = std::chrono::steady_clock::now();
  if (now - slots.last_warning < std::chrono::seconds(1)) return 0;
  slots.last_warning = now;
  return std::exchange(slots.refused, 0);
}

bool HttpServer::take(Slots& slots) {
  std::lock_guard lock(mu_);
  if (slots.open >= slots.limit) return false;
  ++slots.open;
  return true;
}

void HttpServer::accept_loop(int listen_fd, bool tcp) {
  while (!stopping_) {
    pollfd fds[2] = {{wake_[0], POLLIN, 0}, {listen_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("HTTP API: poll failed: {}", errno_text());
      return;
    }
    if (stopping_ || fds[0].revents) return;
    if (!(fds[1].revents & POLLIN)) continue;
    const int conn = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    if (tcp) accept_tcp(conn);
    else accept_unix(conn);
  }
}

void HttpServer::accept_unix(int conn) {
  const auto who = peer_identity_of(conn);
  if (!who || !peers_.admits(*who)) {
    spdlog::warn("HTTP API: connection refused: uid {} is neither root nor in the socket group",
                 who ? std::to_string(who->uid) : "unknown");
    refuse(conn, 403, "this socket is for root and the socket group (socket_group in qwen3-bpfd.conf)", true);
    return;
  }
  if (!take(unix_)) {
    if (const auto n = warn_now(unix_))
      spdlog::warn("HTTP API: Unix-socket connection refused: {} open (http_max_connections); {} refused since the "
                   "last such message", unix_.open.load(), n);
    refuse(conn, 503, "too many open connections on this socket (http_max_connections = " +
                          std::to_string(unix_.limit) + "); retry later", true);
    return;
  }
  spawn(conn, who->uid, false, unix_);
}

void HttpServer::accept_tcp(int conn) {
  // Counted apart until its first request head shows the token (serve_connection moves it to tcp_).
  if (!take(pending_)) {
    if (const auto n = warn_now(pending_))
      spdlog::warn("HTTP API: TCP connection refused: {} not yet authenticated (http_max_unauthenticated); {} refused "
                   "since the last such message", pending_.open.load(), n);
    refuse(conn, 503, "too many TCP connections waiting to send a request (http_max_unauthenticated = " +
                          std::to_string(pending_.limit) + "); retry later", false);
    return;
  }
  spawn(conn, kTcpClientUid, true, pending_);
}

void HttpServer::spawn(int conn, uint32_t uid, bool tcp, Slots& slot) {
  {
    std::lock_guard lock(mu_);
    ++connections_;
    open_fds_.push_back(conn);
  }
  std::thread([this, conn, uid, tcp, held = &slot]() mutable {
    try {
      serve_connection(conn, uid, tcp, held);
    } catch (const std::exception& e) {
      spdlog::error("HTTP API: connection failed: {}", e.what());
    }
    std::lock_guard lock(mu_);
    std::erase(open_fds_, conn);
    close(conn);
    --held->open;
    --connections_;
    idle_.notify_all();
  }).detach();
}

void HttpServer::serve_connection(int fd, uint32_t uid, bool tcp, Slots*& held) {
  using std::chrono::milliseconds;
  FdStream stream(fd);
  boost::beast::flat_buffer buffer;
  const auto write_timeout = std::chrono::duration_cast<milliseconds>(options_.write_timeout);
  const auto header_timeout = std::chrono::duration_cast<milliseconds>(options_.header_timeout);
  bool authenticated = !tcp;
  // An answer the transport gives on its own (the request never reaches the
  // handler); it ends the connection with a lingering close.
  auto answer = [&](const Request& req, int status, const std::string& message, const char* code) {
    Exchange ex(stream, req, uid, write_timeout);
    beast_http::response<beast_http::string_body> res{static_cast<beast_http::status>(status), 11};
    res.set(beast_http::field::content_type, "application/json");
    res.set(beast_http::field::server, "qwen3-bpfd");
    if (status == 401) res.set(beast_http::field::www_authenticate, "Bearer");
    res.keep_alive(false);
    res.body() = error_json(message, status >= 500 ? "server_error" : "invalid_request_error", code);
    res.prepare_payload();
    stream.expires_after(write_timeout);
    error_code ec;
    beast_http::write(stream, res, ec);
    if (!ec) linger_close(fd, options_.linger_time, std::min(options_.linger_time, milliseconds(1000)), options_.linger_bytes);
    if (observer_) observer_(ex.path(), status);
  };
  while (!stopping_) {
    // A TCP client has auth_timeout from its connect to send a whole head; then header_timeout per request.
    const milliseconds head_time = authenticated ? header_timeout : std::min(header_timeout, options_.auth_timeout);
    const std::string within = seconds_text(head_time) + (authenticated ? " (http_header_timeout_seconds)"
                                                                        : " of connecting (TCP clients before their token)");
    if (buffer.size() == 0 && !stream.wait_readable(authenticated ? std::chrono::duration_cast<milliseconds>(options_.idle_timeout)
                                                                  : head_time))
      return;  // idle keep-alive connection, or a TCP client that never spoke: closed
    if (stopping_) return;
    // One deadline for the head and the body, whatever `Expect` says.
    const auto deadline = FdStream::Clock::now() + head_time;
    beast_http::request_parser<beast_http::string_body> parser;
    parser.header_limit(16 * 1024);
    parser.body_limit(options_.max_body_bytes);
    stream.set_deadline(deadline);
    error_code ec;
    beast_http::read_header(stream, buffer, parser, ec);
    const Request& head = parser.get();
    if (ec == beast_http::error::end_of_stream || ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset) return;
    if (ec == boost::asio::error::timed_out)
      return answer(head, 408, "the request head did not arrive within " + within, "request_timeout");
    if (ec == beast_http::error::header_limit) return answer(head, 431, "the request head is larger than 16 KiB", nullptr);
    if (ec == beast_http::error::body_limit)
      return answer(head, 413, "the request body is larger than " + std::to_string(options_.max_body_bytes) +
                                   " bytes (http_max_body_bytes)", "request_too_large");
    if (ec) return answer(head, 400, "malformed HTTP request: " + ec.message(), nullptr);

    if (!authenticated) {
      const auto auth = head[beast_http::field::authorization];
      const std::string_view value(auth.data(), auth.size());
      if (value.rfind("Bearer ", 0) != 0 || !same_token(value.substr(7), options_.token))
        return answer(head, 401,
                      value.empty() ? "missing bearer token: send Authorization: Bearer <token from http_token_file>"
                                    : "wrong bearer token",
                      "invalid_api_key");
      if (!move_slot(held, tcp_))
        return answer(head, 503, "too many open TCP connections (http_max_connections = " + std::to_string(tcp_.limit) +
                                     "); retry later", nullptr);
      authenticated = true;
    }
    if (beast_http::token_list(head[beast_http::field::expect]).exists("100-continue")) {
      boost::asio::write(stream, boost::asio::buffer(std::string_view("HTTP/1.1 100 Continue\r\n\r\n")), ec);
      if (ec) return;
    }
    beast_http::read(stream, buffer, parser, ec);
    if (ec == boost::asio::error::timed_out)
      return answer(head, 408, "the request body did not arrive within " + within, "request_timeout");
    if (ec == beast_http::error::body_limit)
      return answer(head, 413, "the request body is larger than " + std::to_string(options_.max_body_bytes) +
                                   " bytes (http_max_body_bytes)", "request_too_large");
    if (ec == boost::asio::error::eof || ec == beast_http::error::partial_message) return;
    if (ec) return answer(head, 400, "malformed HTTP request: " + ec.message(), nullptr);

    const Request req = parser.release();
    Exchange ex(stream, req, uid, write_timeout);
    handler_(ex);
    if (ex.status() == 0) {  // the client left before an answer: nothing was sent
      if (observer_) observer_(ex.path(), 499);
      return;
    }
    if (observer_) observer_(ex.path(), ex.status());
    if (!ex.keep_alive()) return;
  }
}

}  // namespace qwen3::http
