#include "service/config_keys.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <type_traits>

#include "common/error.h"

// HOW TO ADD A KEY: give DaemonConfig (config.h) its field, then add ONE entry
// to the section function below where the key belongs, with the builder of its
// type (integer, choice, boolean, path, text). Say honestly whether a SIGHUP
// can apply it: OnReload::apply only if main.cpp's reload() really hands the new
// value to the running daemon (e.g. through session_limits_from); otherwise
// OnReload::restart, and the reload keeps the running value and says so. Then
// regenerate the conf file and docs (ninja -C build config-docs). Parsing, the
// default, --check, reload, status and the docs follow from the entry; the
// Config* tests and the daemon_config_reload integration test cover it (the
// latter picks a changed value from the key's allowed values; a key that
// constrains another, like http_listen, may need a line in its other_value).

namespace qwen3 {

namespace {

constexpr OnReload kApply = OnReload::apply;
constexpr OnReload kRestart = OnReload::restart;

// The parts of an entry that every type has.
struct Spec {
  const char* name;
  const char* default_value;
  OnReload on_reload;
  const char* doc;
  const char* flag = "";
};

template <typename T>
ConfigKey key_of(const Spec& s, T DaemonConfig::*field, std::string allowed) {
  ConfigKey k;
  k.name = s.name;
  k.default_value = s.default_value;
  k.allowed = std::move(allowed);
  k.on_reload = s.on_reload;
  k.flag = s.flag;
  k.doc = s.doc;
  k.copy = [field](DaemonConfig& to, const DaemonConfig& from) { to.*field = from.*field; };
  return k;
}

std::string error_at(const std::string& where, const std::string& key, const std::string& what) {
  return where + ": " + key + " " + what;
}

ConfigKey integer(const Spec& s, int DaemonConfig::*field, long lo, long hi) {
  ConfigKey k = key_of(s, field, std::to_string(lo) + ".." + std::to_string(hi));
  const std::string name = s.name;
  k.parse = [=](DaemonConfig& c, const std::string& v, const std::string& where) {
    c.*field = parse_config_int(name, v, where, lo, hi);
  };
  k.text = [field](const DaemonConfig& c) { return std::to_string(c.*field); };
  return k;
}

// One of a list of words; T is std::string or int (kv_bits: 8|16).
template <typename T>
ConfigKey choice(const Spec& s, T DaemonConfig::*field, std::vector<std::string> words) {
  std::string list;
  for (const auto& w : words) list += (list.empty() ? "" : "|") + w;
  ConfigKey k = key_of(s, field, list);
  const std::string name = s.name;
  k.parse = [=](DaemonConfig& c, const std::string& v, const std::string& where) {
    for (const auto& w : words) {
      if (v != w) continue;
      if constexpr (std::is_same_v<T, int>) c.*field = std::stoi(v);
      else c.*field = v;
      return;
    }
    throw invalid_argument(error_at(where, name, "must be one of " + list + " (got '" + v + "')"));
  };
  k.text = [field](const DaemonConfig& c) {
    if constexpr (std::is_same_v<T, int>) return std::to_string(c.*field);
    else return c.*field;
  };
  return k;
}

ConfigKey boolean(const Spec& s, bool DaemonConfig::*field) {
  ConfigKey k = key_of(s, field, "true|false");
  const std::string name = s.name;
  k.parse = [=](DaemonConfig& c, const std::string& v, const std::string& where) {
    if (v == "true" || v == "yes" || v == "1") c.*field = true;
    else if (v == "false" || v == "no" || v == "0") c.*field = false;
    else throw invalid_argument(error_at(where, name, "must be true or false (got '" + v + "')"));
  };
  k.text = [field](const DaemonConfig& c) { return std::string(c.*field ? "true" : "false"); };
  return k;
}

// What else a path key accepts besides an absolute path.
struct PathRule {
  bool empty_ok = false;
  bool off_ok = false;     // the word "off"
  bool unix_socket = false;  // a Unix socket path: at most 107 bytes
};

ConfigKey path(const Spec& s, std::string DaemonConfig::*field, PathRule rule) {
  std::string allowed = "absolute path";
  if (rule.unix_socket) allowed += " (at most 107 bytes)";
  if (rule.empty_ok) allowed += rule.off_ok ? ", empty or off" : " or empty";
  ConfigKey k = key_of(s, field, allowed);
  const std::string name = s.name;
  k.parse = [=](DaemonConfig& c, const std::string& v, const std::string& where) {
    const bool word = (rule.empty_ok && v.empty()) || (rule.off_ok && v == "off");
    if (!word && (v.empty() || v[0] != '/'))
      throw invalid_argument(error_at(where, name, "must be an absolute path (got '" + v + "')"));
    if (rule.unix_socket && v.size() >= 108)
      throw invalid_argument(error_at(where, name, "is longer than a Unix socket path may be (107 bytes)"));
    c.*field = v;
  };
  k.text = [field](const DaemonConfig& c) { return c.*field; };
  return k;
}

ConfigKey text(const Spec& s, std::string DaemonConfig::*field, std::string allowed) {
  ConfigKey k = key_of(s, field, std::move(allowed));
  k.parse = [field](DaemonConfig& c, const std::string& v, const std::string&) { c.*field = v; };
  k.text = [field](const DaemonConfig& c) { return c.*field; };
  return k;
}

ConfigKey described(ConfigKey k, std::function<std::string(const DaemonConfig&)> describe) {
  k.describe = std::move(describe);
  return k;
}

// ------------------------------------------------------------------ the table

std::vector<ConfigKey> model_keys() {
  return {
      described(path({"model_dir", "", kRestart,
                       "Hugging Face Qwen3 model directory (config.json, *.safetensors, tokenizer.json). Empty: "
                       "the default model that quickstart installed in <state_dir>/models/default",
                       "--model"},
                      &DaemonConfig::model_dir, {.empty_ok = true}),
                [](const DaemonConfig& c) {
                  return c.effective_model_dir() + (c.uses_default_model() ? " (default model)" : "");
                }),
      choice({"backend", "bpf", kRestart,
              "Forward-pass implementation: bpf, the product, runs it in verified eBPF programs in the kernel; "
              "reference is float32 in user space, a debugging aid only",
              "--backend"},
             &DaemonConfig::backend, {"bpf", "reference"}),
      choice({"weight_path", "map", kRestart, "How the bpf backend holds the weights: BPF array maps or a BPF arena (some kernels refuse arena maps "
              "even to root; the load then says so)",
              "--weights"},
             &DaemonConfig::weight_path, {"map", "arena"}),
      choice({"precision", "q8", kRestart,
              "Fixed-point format of the weights: q8 (int8 with scales; the default: 1.6-2.5x faster than q24 and "
              "as accurate on the shipped model, docs/numerics.md), q24 (int32, 24 fraction bits) or q4 (4-bit "
              "attention and gate/up weights against 8-bit inputs, the rest q8: less kernel memory and faster, "
              "less accurate; docs/numerics.md)",
              "--precision"},
             &DaemonConfig::precision, {"q24", "q8", "q4"}),
      choice({"kv_bits", "8", kRestart,
              "KV cache element width: 8 (compact: 56 KiB per position at the 0.6B shape; agrees with the float "
              "reference on every held-out position of the shipped model, docs/numerics.md) or 16 (113.75 KiB "
              "per position). The KV maps are sized at load"},
             &DaemonConfig::kv_bits, {"8", "16"}),
      integer({"threads", "0", kRestart, "Worker threads that run BPF programs (0: one per online CPU)", "--threads"},
              &DaemonConfig::threads, 0, 1024),
      choice({"driver", "auto", kRestart,
              "Who steers decoding for requests that do not choose (gRPC and HTTP `driver`): user (a bpf() call "
              "per operator share from the engine's threads) or kernel (one submission, then a chain of bpf_wq "
              "links computes, samples and stops in the kernel, in turns of a few tokens shared with the other "
              "sessions; docs/kernel-driver.md). auto: kernel, the faster here by measurement for one session and "
              "for four (docs/performance.md), and user for requests it cannot serve. user does not load the "
              "kernel driver's programs. Speculative decoding and logprobs always decode in user space"},
             &DaemonConfig::driver, {"auto", "kernel", "user"}),
  };
}

std::vector<ConfigKey> access_keys() {
  return {
      path({"socket_path", "/run/qwen3-bpfd/qwen3-bpfd.sock", kRestart,
            "Unix socket of the gRPC API (ignored when started by qwen3-bpfd.socket, which passes its own)",
            "--socket"},
           &DaemonConfig::socket_path, {.unix_socket = true}),
      text({"socket_group", "qwen3-bpf", kApply,
            "Group allowed to connect (besides root). If it does not exist the socket is root-only"},
           &DaemonConfig::socket_group, "a group name or empty"),
      text({"admin_group", "", kApply,
            "Group allowed to call VerifyProgram / GenerateVerified (besides root); empty: root only"},
           &DaemonConfig::admin_group, "a group name or empty"),
      integer({"grpc_max_connections", "128", kRestart,
               "Open connections on the gRPC socket at most (more: closed and logged); the HTTP listeners have "
               "limits of their own"},
              &DaemonConfig::grpc_max_connections, 1, 100000),
  };
}

std::vector<ConfigKey> http_keys() {
  ConfigKey listen = text({"http_listen", "", kRestart,
                           "Loopback TCP listener of the HTTP API, off when empty. Clients must send "
                           "`Authorization: Bearer <token>` with the token in http_token_file",
                           "--http-listen"},
                          &DaemonConfig::http_listen, "127.0.0.1:PORT (any 127.x.y.z), [::1]:PORT or empty");
  listen.parse = [](DaemonConfig& c, const std::string& v, const std::string& where) {
    if (!v.empty()) parse_loopback_address(v, where);
    c.http_listen = v;
  };
  listen.describe = [](const DaemonConfig& c) { return c.http_listen.empty() ? "(off)" : c.http_listen; };
  return {
      described(path({"http_socket", "", kRestart,
                      "Unix socket of the OpenAI-compatible HTTP API (docs/http-api.md), with the gRPC socket's "
                      "mode, group and peer check (ignored when qwen3-bpfd-http.socket passes one). Empty: "
                      "http.sock next to socket_path (/run/qwen3-bpfd/http.sock); off: no HTTP socket",
                      "--http-socket"},
                     &DaemonConfig::http_socket, {.empty_ok = true, .off_ok = true, .unix_socket = true}),
                [](const DaemonConfig& c) {
                  return c.effective_http_socket().empty() ? "(off)" : c.effective_http_socket();
                }),
      std::move(listen),
      path({"http_token_file", "", kRestart,
            "File with the bearer token the TCP listener requires (needed with http_listen), e.g. "
            "/etc/qwen3-bpfd/http-token"},
           &DaemonConfig::http_token_file, {.empty_ok = true}),
      integer({"http_max_body_bytes", "4194304", kRestart, "Largest request body, bytes (larger: 413)"},
              &DaemonConfig::http_max_body_bytes, 1024, 1 << 30),
      integer({"http_header_timeout_seconds", "10", kRestart,
               "A request's head and body must arrive within this many seconds (else 408)"},
              &DaemonConfig::http_header_timeout_seconds, 1, 3600),
      integer({"http_idle_timeout_seconds", "60", kRestart,
               "An idle keep-alive connection is closed after this many seconds"},
              &DaemonConfig::http_idle_timeout_seconds, 1, 86400),
      integer({"http_max_connections", "64", kRestart,
               "Open HTTP connections at most, per listener: the Unix socket, and TCP clients that showed the "
               "token (more: 503 and closed)"},
              &DaemonConfig::http_max_connections, 1, 10000),
      integer({"http_max_unauthenticated", "16", kRestart,
               "TCP connections whose first request head has not yet arrived with the token (more: 503 and "
               "closed at once); they never count against http_max_connections"},
              &DaemonConfig::http_max_unauthenticated, 1, 10000),
      text({"model_name", "", kRestart,
            "The model's id in /v1/models and the `model` requests must name; empty: the model directory's name"},
           &DaemonConfig::model_name, "any text"),
  };
}

ConfigKey speculative_key() {
  ConfigKey k = key_of({"speculative", "auto", kApply,
                        "Prompt-lookup speculative decoding for requests that do not choose (gRPC and HTTP "
                        "`speculative`). Same greedy output, same sampling distribution; faster when the answer "
                        "copies its prompt. auto: on where a verification pass saves work (q24), off for q8, whose "
                        "kernel costs the same per position in a pass as alone (docs/performance.md)"},
                       &DaemonConfig::speculative, "auto|on|off");
  k.parse = [](DaemonConfig& c, const std::string& v, const std::string& where) {
    if (v == "auto") c.speculative.reset();
    else if (v == "on" || v == "true" || v == "yes" || v == "1") c.speculative = true;
    else if (v == "off" || v == "false" || v == "no" || v == "0") c.speculative = false;
    else throw invalid_argument(error_at(where, "speculative", "must be auto, on or off (got '" + v + "')"));
  };
  k.text = [](const DaemonConfig& c) { return speculative_text(c.speculative); };
  return k;
}

std::vector<ConfigKey> session_keys() {
  return {
      integer({"max_sessions", "64", kApply,
               "Named sessions at most; the least recently used idle one is evicted to make room"},
              &DaemonConfig::max_sessions, 1, 100000),
      integer({"kv_budget_mib", "1024", kApply,
               "Total KV cache memory of all sessions (kernel BPF maps for the bpf backend), MiB; at load the "
               "weights plus this budget must fit the memory the daemon may use, or the model is refused "
               "(docs/shapes.md)"},
              &DaemonConfig::kv_budget_mib, 1, 1 << 24),
      integer({"max_sessions_per_uid", "16", kApply,
               "Named sessions one uid may hold; at its quota a uid's own least recently used idle session is "
               "evicted, never another uid's within its quota (HTTP prompt caches count)"},
              &DaemonConfig::max_sessions_per_uid, 1, 100000),
      integer({"kv_budget_mib_per_uid", "512", kApply, "KV cache memory one uid's sessions may hold, MiB"},
              &DaemonConfig::kv_budget_mib_per_uid, 1, 1 << 24),
      integer({"session_ttl_seconds", "3600", kApply, "Idle sessions are deleted after this many seconds (0: never)"},
              &DaemonConfig::session_ttl_seconds, 0, INT_MAX),
      integer({"default_context", "2048", kApply, "Positions of a session created without max_context"},
              &DaemonConfig::default_context, 1, 1 << 20),
      integer({"max_context", "8192", kApply,
               "Largest context any request or session may use (also capped by the model)"},
              &DaemonConfig::max_context, 1, 1 << 20),
      integer({"default_max_new_tokens", "256", kApply, "max_new_tokens when a Generate request gives none"},
              &DaemonConfig::default_max_new_tokens, 1, 1 << 20),
      integer({"prefill_chunk", "64", kRestart,
               "Prompt tokens of one session computed per engine step (fairness between sessions); the "
               "scheduler is built with it at load"},
              &DaemonConfig::prefill_chunk, 1, 4096),
      speculative_key(),
  };
}

std::vector<ConfigKey> daemon_keys() {
  return {
      choice({"log_level", "info", kApply, "How much the daemon logs", "--log-level"}, &DaemonConfig::log_level,
             {"trace", "debug", "info", "warn", "error", "critical", "off"}),
      path({"state_dir", "/var/lib/qwen3-bpfd", kRestart, "Generated default model, saved sessions and other state",
            "--state-dir"},
           &DaemonConfig::state_dir, {}),
      boolean({"persist_sessions", "true", kRestart,
               "Save idle sessions' tokens to <state_dir>/sessions.json at shutdown and recompute them after the "
               "next start. Saving and restoring are set up when the model loads"},
              &DaemonConfig::persist_sessions),
  };
}

// "IFACE:PORT": an interface name (1..15 bytes, no '/', ':' or space) and a port 1..65535.
void check_udp_endpoint(const std::string& v, const std::string& where) {
  const auto colon = v.rfind(':');
  const std::string iface = colon == std::string::npos ? "" : v.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : v.substr(colon + 1);
  const bool iface_ok = !iface.empty() && iface.size() <= 15 && iface.find_first_of("/: \t") == std::string::npos;
  if (!iface_ok || port.empty() || port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
      std::stoi(port) < 1 || std::stoi(port) > 65535)
    throw invalid_argument(error_at(where, "udp_endpoint", "must be IFACE:PORT (e.g. lo:7070) or empty (got '" + v + "')"));
}

std::vector<ConfigKey> kernel_client_keys() {
  ConfigKey endpoint = text({"udp_endpoint", "", kRestart,
                             "UDP endpoint of kernel clients, an XDP program on IFACE answering on PORT (e.g. "
                             "lo:7070; generic mode where the driver has none). Empty: off, no XDP program attached"},
                            &DaemonConfig::udp_endpoint, "IFACE:PORT or empty");
  endpoint.parse = [](DaemonConfig& c, const std::string& v, const std::string& where) {
    if (!v.empty()) check_udp_endpoint(v, where);
    c.udp_endpoint = v;
  };
  endpoint.describe = [](const DaemonConfig& c) { return c.udp_endpoint.empty() ? "(off)" : c.udp_endpoint; };
  return {
      std::move(endpoint),
      integer({"kernel_client_uid", "65534", kRestart,
               "Owner uid of the sessions kernel clients (UDP datagrams, BPF programs) create and use; they "
               "count against this uid's quotas like an API user's"},
              &DaemonConfig::kernel_client_uid, 0, INT_MAX),
      integer({"udp_rate_limit", "50", kRestart,
               "Generate and cancel datagrams per second one source address may send (bursts of as many); "
               "more are dropped in the XDP program and counted. 0: no limit"},
              &DaemonConfig::udp_rate_limit, 0, 1000000),
      path({"kernel_client_pin_dir", "", kRestart,
            "bpffs directory where the submission ring and result maps are pinned for other BPF programs (mode "
            "0600, root), e.g. /sys/fs/bpf/qwen3-bpfd; the daemon mounts a bpffs at /sys/fs/bpf if none is. Empty: "
            "not pinned"},
           &DaemonConfig::kernel_client_pin_dir, {.empty_ok = true}),
  };
}

std::vector<ConfigKey> build_table() {
  std::vector<ConfigKey> all;
  const std::pair<const char*, std::vector<ConfigKey>> sections[] = {
      {"model", model_keys()},
      {"access", access_keys()},
      {"HTTP API (docs/http-api.md)", http_keys()},
      {"sessions and memory", session_keys()},
      {"daemon", daemon_keys()},
      {"kernel clients (docs/kernel-clients.md)", kernel_client_keys()},
  };
  for (const auto& [section, keys] : sections) {
    for (ConfigKey k : keys) {
      k.section = section;
      if (!k.describe) k.describe = k.text;
      all.push_back(std::move(k));
    }
  }
  return all;
}

}  // namespace

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> table = build_table();
  return table;
}

const ConfigKey* find_config_key(std::string_view name) {
  for (const auto& k : config_keys())
    if (k.name == name) return &k;
  return nullptr;
}

std::string config_key_names() {
  std::string names;
  for (const auto& k : config_keys()) names += (names.empty() ? "" : ", ") + k.name;
  return names;
}

int parse_config_int(const std::string& key, const std::string& value, const std::string& where, long lo, long hi) {
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

}  // namespace qwen3
