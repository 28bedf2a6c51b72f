#include "service/config.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "service/config_keys.h"

namespace qwen3 {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

}  // namespace

DaemonConfig::DaemonConfig() {
  for (const auto& k : config_keys()) k.parse(*this, k.default_value, "built-in default");
}

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
  const ConfigKey* k = find_config_key(key);
  if (!k) throw invalid_argument(where + ": unknown key '" + key + "' (known: " + config_key_names() + ")");
  k->parse(c, value, where);
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
  if (c.state_dir.empty()) throw invalid_argument(where + ": state_dir must not be empty");
  if (!c.http_listen.empty() && c.http_token_file.empty())
    throw invalid_argument(where + ": http_listen needs http_token_file (the bearer token TCP clients must send)");
}

LoopbackAddress parse_loopback_address(const std::string& value, const std::string& where) {
  const auto colon = value.rfind(':');
  std::string host = colon == std::string::npos ? "" : value.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = colon == std::string::npos ? "" : value.substr(colon + 1);
  // Any address of 127.0.0.0/8 (a fleet on one host gives each daemon its own: 127.0.0.2, ...).
  in_addr v4{};
  const bool loopback_v4 = inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
  if (!loopback_v4 && host != "::1" && host != "localhost")
    throw invalid_argument(where + ": http_listen must be a loopback address, 127.x.y.z:PORT (127.0.0.0/8) or "
                           "[::1]:PORT (got '" + value + "'); put a proxy in front of it to serve other hosts");
  LoopbackAddress a;
  a.host = host == "localhost" ? "127.0.0.1" : host;
  a.port = parse_config_int("http_listen port", port, where, 1, 65535);
  return a;
}

std::string speculative_text(const std::optional<bool>& s) { return !s ? "auto" : *s ? "on" : "off"; }

std::map<std::string, std::string> describe_config(const DaemonConfig& c) {
  std::map<std::string, std::string> out;
  for (const auto& k : config_keys()) out[k.name] = k.describe(c);
  return out;
}

}  // namespace qwen3
