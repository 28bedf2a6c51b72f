#include "service/config.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>

#include "common/error.h"

namespace qwen3 {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

int parse_int(const std::string& key, const std::string& value, const std::string& where, long lo, long hi) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE)
    throw invalid_argument(where + ": " + key + " must be an integer (got '" + value + "')");
  if (v < lo || v > hi)
    throw invalid_argument(where + ": " + key + " must be between " + std::to_string(lo) + " and " +
                           std::to_string(hi) + " (got " + value + ")");
  return static_cast<int>(v);
}

std::string one_of(const std::string& key, const std::string& value, const std::string& where,
                   std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (value == a) return value;
    list += (list.empty() ? "" : "|") + std::string(a);
  }
  throw invalid_argument(where + ": " + key + " must be one of " + list + " (got '" + value + "')");
}

std::string absolute_path(const std::string& key, const std::string& value, const std::string& where) {
  if (value.empty() || value[0] != '/')
    throw invalid_argument(where + ": " + key + " must be an absolute path (got '" + value + "')");
  return value;
}

}  // namespace

std::string DaemonConfig::effective_http_socket() const {
  if (http_socket == "off") return "";
  if (!http_socket.empty()) return http_socket;
  const auto slash = socket_path.rfind('/');
  return (slash == std::string::npos ? std::string(".") : socket_path.substr(0, slash)) + "/http.sock";
}

std::string DaemonConfig::effective_model_dir() const {
  return model_dir.empty() ? state_dir + "/models/default" : model_dir;
}

void set_config_value(DaemonConfig& c, const std::string& key, const std::string& value, const std::string& where) {
  if (key == "model_dir") {
    c.model_dir = value.empty() ? "" : absolute_path(key, value, where);
  } else if (key == "backend") {
    c.backend = one_of(key, value, where, {"bpf", "reference"});
  } else if (key == "weight_path") {
    c.weight_path = one_of(key, value, where, {"map", "arena"});
  } else if (key == "precision") {
    c.precision = one_of(key, value, where, {"q24", "q8"});
  } else if (key == "kv_bits") {
    c.kv_bits = std::stoi(one_of(key, value, where, {"8", "16"}));
  } else if (key == "threads") {
    c.threads = parse_int(key, value, where, 0, 1024);
  } else if (key == "socket_path") {
    c.socket_path = absolute_path(key, value, where);
    if (value.size() >= 108) throw invalid_argument(where + ": socket_path is longer than a Unix socket path may be (107 bytes)");
  } else if (key == "socket_group") {
    c.socket_group = value;
  } else if (key == "admin_group") {
    c.admin_group = value;
  } else if (key == "max_sessions") {
    c.max_sessions = parse_int(key, value, where, 1, 100000);
  } else if (key == "kv_budget_mib") {
    c.kv_budget_mib = parse_int(key, value, where, 1, 1 << 24);
  } else if (key == "max_sessions_per_uid") {
    c.max_sessions_per_uid = parse_int(key, value, where, 1, 100000);
  } else if (key == "kv_budget_mib_per_uid") {
    c.kv_budget_mib_per_uid = parse_int(key, value, where, 1, 1 << 24);
  } else if (key == "session_ttl_seconds") {
    c.session_ttl_seconds = parse_int(key, value, where, 0, INT_MAX);
  } else if (key == "default_context") {
    c.default_context = parse_int(key, value, where, 1, 1 << 20);
  } else if (key == "max_context") {
    c.max_context = parse_int(key, value, where, 1, 1 << 20);
  } else if (key == "default_max_new_tokens") {
    c.default_max_new_tokens = parse_int(key, value, where, 1, 1 << 20);
  } else if (key == "speculative") {
    if (value == "auto") c.speculative.reset();
    else if (value == "on" || value == "true" || value == "yes" || value == "1") c.speculative = true;
    else if (value == "off" || value == "false" || value == "no" || value == "0") c.speculative = false;
    else throw invalid_argument(where + ": speculative must be auto, on or off (got '" + value + "')");
  } else if (key == "prefill_chunk") {
    c.prefill_chunk = parse_int(key, value, where, 1, 4096);
  } else if (key == "log_level") {
    c.log_level = one_of(key, value, where, {"trace", "debug", "info", "warn", "error", "critical", "off"});
  } else if (key == "state_dir") {
    c.state_dir = absolute_path(key, value, where);
  } else if (key == "persist_sessions") {
    if (value == "true" || value == "yes" || value == "1") c.persist_sessions = true;
    else if (value == "false" || value == "no" || value == "0") c.persist_sessions = false;
    else throw invalid_argument(where + ": persist_sessions must be true or false (got '" + value + "')");
  } else if (key == "http_socket") {
    c.http_socket = value.empty() || value == "off" ? value : absolute_path(key, value, where);
    if (value.size() >= 108) throw invalid_argument(where + ": http_socket is longer than a Unix socket path may be (107 bytes)");
  } else if (key == "http_listen") {
    c.http_listen = value;
    if (!value.empty()) parse_loopback_address(value, where);
  } else if (key == "http_token_file") {
    c.http_token_file = value.empty() ? "" : absolute_path(key, value, where);
  } else if (key == "http_max_body_bytes") {
    c.http_max_body_bytes = parse_int(key, value, where, 1024, 1 << 30);
  } else if (key == "http_header_timeout_seconds") {
    c.http_header_timeout_seconds = parse_int(key, value, where, 1, 3600);
  } else if (key == "http_idle_timeout_seconds") {
    c.http_idle_timeout_seconds = parse_int(key, value, where, 1, 86400);
  } else if (key == "http_max_connections") {
    c.http_max_connections = parse_int(key, value, where, 1, 10000);
  } else if (key == "http_max_unauthenticated") {
    c.http_max_unauthenticated = parse_int(key, value, where, 1, 10000);
  } else if (key == "grpc_max_connections") {
    c.grpc_max_connections = parse_int(key, value, where, 1, 100000);
  } else if (key == "model_name") {
    c.model_name = value;
  } else {
    throw invalid_argument(where + ": unknown key '" + key +
                           "' (known: model_dir, backend, weight_path, precision, kv_bits, threads, socket_path, socket_group, "
                           "admin_group, max_sessions, kv_budget_mib, max_sessions_per_uid, kv_budget_mib_per_uid, session_ttl_seconds, default_context, max_context, "
                           "default_max_new_tokens, prefill_chunk, speculative, log_level, state_dir, persist_sessions, http_socket, http_listen, "
                           "http_token_file, http_max_body_bytes, http_header_timeout_seconds, http_idle_timeout_seconds, "
                           "http_max_connections, http_max_unauthenticated, grpc_max_connections, model_name)");
  }
}

void load_config_file(const std::string& path, DaemonConfig& config, bool required) {
  std::ifstream in(path);
  if (!in) {
    if (required) throw not_found("cannot read config file " + path + ": " + std::strerror(errno));
    return;
  }
  config.config_file = path;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = path + ":" + std::to_string(number);
    const auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos)
      throw invalid_argument(where + ": expected 'key = value' (got '" + line + "')");
    const std::string key = trim(line.substr(0, eq));
    std::string value = trim(line.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    if (key.empty()) throw invalid_argument(where + ": missing key before '='");
    set_config_value(config, key, value, where);
  }
}

void validate_config(const DaemonConfig& c) {
  const std::string where = c.config_file.empty() ? "configuration" : c.config_file;
  if (c.default_context > c.max_context)
    throw invalid_argument(where + ": default_context (" + std::to_string(c.default_context) +
                           ") must not exceed max_context (" + std::to_string(c.max_context) + ")");
  if (c.backend == "reference" && (c.weight_path != "map" || c.precision != "q24")) {
    // Harmless, but say so: these options only shape the in-kernel engine.
  }
  if (c.state_dir.empty()) throw invalid_argument(where + ": state_dir must not be empty");
  if (!c.http_listen.empty() && c.http_token_file.empty())
    throw invalid_argument(where + ": http_listen needs http_token_file (the bearer token TCP clients must send)");
}

LoopbackAddress parse_loopback_address(const std::string& value, const std::string& where) {
  const auto colon = value.rfind(':');
  std::string host = colon == std::string::npos ? "" : value.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = colon == std::string::npos ? "" : value.substr(colon + 1);
  if (host != "127.0.0.1" && host != "::1" && host != "localhost")
    throw invalid_argument(where + ": http_listen must be a loopback address, 127.0.0.1:PORT or [::1]:PORT (got '" +
                           value + "'); put a proxy in front of it to serve other hosts");
  LoopbackAddress a;
  a.host = host == "localhost" ? "127.0.0.1" : host;
  a.port = parse_int("http_listen port", port, where, 1, 65535);
  return a;
}

std::string speculative_text(const std::optional<bool>& s) { return !s ? "auto" : *s ? "on" : "off"; }

std::map<std::string, std::string> describe_config(const DaemonConfig& c) {
  return {
      {"model_dir", c.effective_model_dir() + (c.uses_default_model() ? " (default model)" : "")},
      {"backend", c.backend},
      {"weight_path", c.weight_path},
      {"precision", c.precision},
      {"kv_bits", std::to_string(c.kv_bits)},
      {"threads", std::to_string(c.threads)},
      {"socket_path", c.socket_path},
      {"socket_group", c.socket_group},
      {"admin_group", c.admin_group},
      {"max_sessions", std::to_string(c.max_sessions)},
      {"kv_budget_mib", std::to_string(c.kv_budget_mib)},
      {"max_sessions_per_uid", std::to_string(c.max_sessions_per_uid)},
      {"kv_budget_mib_per_uid", std::to_string(c.kv_budget_mib_per_uid)},
      {"session_ttl_seconds", std::to_string(c.session_ttl_seconds)},
      {"default_context", std::to_string(c.default_context)},
      {"max_context", std::to_string(c.max_context)},
      {"default_max_new_tokens", std::to_string(c.default_max_new_tokens)},
      {"prefill_chunk", std::to_string(c.prefill_chunk)},
      {"speculative", speculative_text(c.speculative)},
      {"log_level", c.log_level},
      {"state_dir", c.state_dir},
      {"persist_sessions", c.persist_sessions ? "true" : "false"},
      {"http_socket", c.effective_http_socket().empty() ? "(off)" : c.effective_http_socket()},
      {"http_listen", c.http_listen.empty() ? "(off)" : c.http_listen},
      {"http_token_file", c.http_token_file},
      {"http_max_body_bytes", std::to_string(c.http_max_body_bytes)},
      {"http_header_timeout_seconds", std::to_string(c.http_header_timeout_seconds)},
      {"http_idle_timeout_seconds", std::to_string(c.http_idle_timeout_seconds)},
      {"http_max_connections", std::to_string(c.http_max_connections)},
      {"http_max_unauthenticated", std::to_string(c.http_max_unauthenticated)},
      {"grpc_max_connections", std::to_string(c.grpc_max_connections)},
      {"model_name", c.model_name},
  };
}

}  // namespace qwen3
