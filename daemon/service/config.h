// qwen3-bpfd's configuration: /etc/qwen3-bpfd/qwen3-bpfd.conf (`key = value`,
// `#` comments), overridden by command-line flags. Every bad value is a
// qwen3::Error naming the file, line and key. The keys, their defaults, ranges
// and reload behaviour are one table: service/config_keys.cpp.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace qwen3 {

// One field per key of the table (config_keys.cpp), which holds the defaults:
// a default-constructed DaemonConfig has every key at its built-in default.
struct DaemonConfig {
  DaemonConfig();

  std::string model_dir;            // empty: <state_dir>/models/default
  std::string backend;              // "bpf" (in-kernel) | "reference" (float, user space, debug only)
  std::string weight_path;          // "map" | "arena"
  std::string precision;            // "q24" | "q8"
  int kv_bits = 0;                  // KV cache element width: 8 | 16 (docs/numerics.md)
  int threads = 0;                  // 0: one per online CPU
  std::string driver;               // "auto" | "kernel" | "user" (docs/kernel-driver.md)
  std::string socket_path;
  std::string socket_group;
  std::string admin_group;          // VerifyProgram/GenerateVerified: root or members of this group
  int max_sessions = 0;
  int kv_budget_mib = 0;
  int max_sessions_per_uid = 0;    // named sessions one uid may hold (its own idle ones are evicted first)
  int kv_budget_mib_per_uid = 0;   // KV memory of one uid's named sessions
  int session_ttl_seconds = 0;      // 0: sessions never expire
  int default_context = 0;
  int max_context = 0;
  int default_max_new_tokens = 0;
  int prefill_chunk = 0;
  // Prompt-lookup speculative decoding for requests that do not say: on, off,
  // or auto (unset): on where it pays (speculation_pays: not for bpf q8).
  std::optional<bool> speculative;
  std::string log_level;            // trace|debug|info|warn|error|critical|off
  std::string state_dir;
  bool persist_sessions = false;    // save sessions at shutdown, restore them at start
  // The OpenAI-compatible HTTP API (docs/http-api.md).
  std::string http_socket;          // "" : http.sock next to socket_path; "off": none
  std::string http_listen;          // "127.0.0.1:PORT" (loopback only); "" : no TCP listener
  std::string http_token_file;      // bearer token the TCP listener requires (needed with http_listen)
  int http_max_body_bytes = 0;
  int http_header_timeout_seconds = 0;  // a request's head and body must arrive within this
  int http_idle_timeout_seconds = 0;    // an idle keep-alive connection is closed after this
  int http_max_connections = 0;         // per listener: the Unix socket, and authenticated TCP clients
  int http_max_unauthenticated = 0;     // TCP connections that have not yet shown the bearer token
  int grpc_max_connections = 0;         // open connections on the gRPC socket
  std::string model_name;           // the model's id in /v1/models ("" : the model directory's name)
  // Kernel clients (docs/kernel-clients.md).
  std::string udp_endpoint;         // "IFACE:PORT" of the XDP endpoint; "" : off (no XDP program attached)
  int kernel_client_uid = 0;        // owner uid of sessions that kernel clients create
  int udp_rate_limit = 0;           // generate/cancel datagrams per second per source address (0: no limit)
  std::string kernel_client_pin_dir;  // bpffs directory of the maps other BPF programs submit through ("": none)
  std::string config_file;          // where it was read from ("" = built-in defaults); not a key

  // The model directory to serve and whether it is the generated default.
  std::string effective_model_dir() const;
  bool uses_default_model() const { return model_dir.empty(); }
  // The HTTP API's Unix socket path, or "" for none.
  std::string effective_http_socket() const;
};

// Reads `path` over `config` (keys not in the file keep their values).
// A missing file is an error only when `required`.
void load_config_file(const std::string& path, DaemonConfig& config, bool required);
// Sets one key from text, as if it appeared in a config file at `where`.
void set_config_value(DaemonConfig& config, const std::string& key, const std::string& value,
                      const std::string& where);
// Checks the combination (ranges, known names). Throws qwen3::Error.
void validate_config(const DaemonConfig& config);
struct LoopbackAddress {
  std::string host;  // an address of 127.0.0.0/8, or "::1"
  int port = 0;
};
// "127.x.y.z:PORT" (127.0.0.0/8), "[::1]:PORT" or "localhost:PORT"; anything else is an error at `where`.
LoopbackAddress parse_loopback_address(const std::string& value, const std::string& where);
// The keys and values, for logs and --check.
std::map<std::string, std::string> describe_config(const DaemonConfig& config);
// "auto", "on" or "off".
std::string speculative_text(const std::optional<bool>& speculative);

}  // namespace qwen3
