// The HTTP API as the daemon runs it: the OpenAI endpoints on the HTTP
// transport, configured from qwen3-bpfd.conf (http_* keys), counted in the
// shared metrics.
#pragma once

#include <chrono>
#include <memory>

#include "http/http_server.h"
#include "http/openai_api.h"
#include "http/socket_activation.h"
#include "service/config.h"
#include "service/inference.h"
#include "listener/listener.h"

namespace qwen3::http {

class HttpApi {
 public:
  // Creates the sockets (nothing when http_socket and http_listen are empty
  // and systemd passed none). Throws qwen3::Error.
  HttpApi(const DaemonConfig& config, InferenceCore& core, const Listener& grpc_listener, ActivatedSockets activated);
  ~HttpApi();

  bool enabled() const { return server_ != nullptr; }
  void start();
  // Stops accepting; running requests get `grace` to finish (generations end
  // within one engine step once the core is shutting down).
  void stop(std::chrono::milliseconds grace);

 private:
  std::unique_ptr<OpenAiApi> api_;
  std::unique_ptr<HttpServer> server_;
};

// The bearer token in `path`, surrounding whitespace removed. Throws when it
// cannot be read or is empty.
std::string read_token_file(const std::string& path);

}  // namespace qwen3::http
