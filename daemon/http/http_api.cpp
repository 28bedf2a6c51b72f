#include "http/http_api.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace qwen3::http {

std::string read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read http_token_file " + path + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  const auto b = t.find_first_not_of(" \t\r\n");
  const auto e = t.find_last_not_of(" \t\r\n");
  t = b == std::string::npos ? "" : t.substr(b, e - b + 1);
  if (t.empty()) throw invalid_argument("http_token_file " + path + " is empty: put the bearer token in it");
  struct stat st{};
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & 0004))
    spdlog::warn("http_token_file {} is readable by everyone: chmod 600 it", path);
  return t;
}

HttpApi::HttpApi(const DaemonConfig& config, InferenceCore& core, const Listener& grpc_listener, ActivatedSockets activated) {
  HttpServerOptions o;
  o.unix_path = config.effective_http_socket();
  o.activated_unix_fd = activated.unix_fd;
  o.tcp_listen = config.http_listen;
  o.activated_tcp_fd = activated.tcp_fd;
  if (!config.http_listen.empty() || activated.tcp_fd >= 0) {
    if (config.http_token_file.empty())
      throw invalid_argument("the HTTP TCP listener needs http_token_file (the bearer token clients must send)");
    o.token = read_token_file(config.http_token_file);
  }
  if (o.unix_path.empty() && o.activated_unix_fd < 0 && o.tcp_listen.empty() && o.activated_tcp_fd < 0) {
    spdlog::info("HTTP API off (http_socket = off and no http_listen)");
    return;
  }
  o.socket_group = config.socket_group;
  o.max_body_bytes = static_cast<size_t>(config.http_max_body_bytes);
  o.header_timeout = std::chrono::seconds(config.http_header_timeout_seconds);
  o.idle_timeout = std::chrono::seconds(config.http_idle_timeout_seconds);
  o.max_connections = config.http_max_connections;
  o.max_unauthenticated = config.http_max_unauthenticated;
  api_ = std::make_unique<OpenAiApi>(core, model_id_of(config), [&grpc_listener, this](MetricsGauges& g) {
    g.grpc_rejected_connections = grpc_listener.rejected();
    if (server_) {
      g.http_connections = server_->connections();
      g.http_rejected_connections = server_->rejected();
    }
  });
  server_ = std::make_unique<HttpServer>(
      o, grpc_listener, [this](Exchange& ex) { api_->handle(ex); },
      [&core](std::string_view path, int status) {
        core.metrics().count_request("http", route_label(path), std::to_string(status));
      });
}

HttpApi::~HttpApi() = default;

void HttpApi::start() {
  if (server_) server_->start();
}

void HttpApi::stop(std::chrono::milliseconds grace) {
  if (server_) server_->stop(grace);
}

}  // namespace qwen3::http
