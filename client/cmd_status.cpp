// `qwen3-bpf status [--wait]` and `qwen3-bpf health [--wait]`.
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "cli_error.h"
#include "command.h"
#include "format.h"
#include "health_check.h"
#include "json_output.h"

namespace qwen3::cli {

namespace v1 = qwen3bpf::v1;
using Clock = std::chrono::steady_clock;

namespace {

const char* load_state_name(v1::LoadState s) {
  switch (s) {
    case v1::LOAD_STATE_LOADING: return "loading";
    case v1::LOAD_STATE_READY: return "ready";
    case v1::LOAD_STATE_FAILED: return "failed";
    default: return "unknown";
  }
}

v1::GetStatusResponse get_status(DaemonClient& client, bool wait_for_ready_connection) {
  v1::GetStatusResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  // While waiting, ride out a daemon that socket activation is still starting.
  ctx.set_wait_for_ready(wait_for_ready_connection);
  client.check(client.stub().GetStatus(&ctx, v1::GetStatusRequest{}, &resp), "status");
  return resp;
}

std::string shown(const std::string& value) { return value.empty() ? "\"\"" : value; }

// Keys a reload could not apply: the value in force and the one on disk.
void print_restart_needed(const v1::GetStatusResponse& s) {
  if (s.restart_needed().empty()) return;
  std::printf("restart needed (systemctl restart qwen3-bpfd): %d changed key%s a reload cannot apply\n",
              s.restart_needed_size(), s.restart_needed_size() == 1 ? "" : "s");
  for (const auto& k : s.restart_needed())
    std::printf("           %s: %s in force, %s on disk\n", k.key().c_str(), shown(k.value_in_force()).c_str(),
                shown(k.value_on_disk()).c_str());
}

void print_status(const v1::GetStatusResponse& s) {
  std::printf("qwen3-bpfd %s: %s", s.version().c_str(), load_state_name(s.load_state()));
  if (s.load_state() == v1::LOAD_STATE_LOADING) std::printf(" %.0f%%", 100.0 * s.load_progress());
  std::printf(" (up %s)\n", format_duration(s.uptime_seconds()).c_str());
  if (!s.load_message().empty()) std::printf("  %s\n", s.load_message().c_str());
  const auto& m = s.model();
  std::printf("model:     %s%s\n", m.path().c_str(), m.is_default_model() ? "  (default model)" : "");
  if (m.hidden_size())
    std::printf("           %d layers, hidden %d, heads %d/%d (head_dim %d), ffn %d, vocab %d, context %d, %s\n",
                m.num_hidden_layers(), m.hidden_size(), m.num_attention_heads(), m.num_key_value_heads(),
                m.head_dim(), m.intermediate_size(), m.vocab_size(), m.max_position_embeddings(),
                format_bytes(m.parameter_bytes()).c_str());
  const auto& b = s.backend();
  std::printf("backend:   %s, weights in %s, %s, %d threads, %d BPF programs, %d BPF maps\n", b.name().c_str(),
              b.weight_path().c_str(), b.precision().c_str(), b.threads(), b.bpf_programs(), b.bpf_maps());
  const auto& mem = s.memory();
  std::printf("memory:    weights %s, KV %s of %s budget\n", format_bytes(mem.weight_bytes()).c_str(),
              format_bytes(mem.kv_bytes()).c_str(), format_bytes(mem.kv_budget_bytes()).c_str());
  const auto& ss = s.sessions();
  std::printf("sessions:  %d of %d (%d busy), idle TTL %llds, context %d default / %d max\n", ss.sessions(),
              ss.max_sessions(), ss.busy_sessions(), static_cast<long long>(ss.ttl_seconds()),
              ss.default_context(), ss.max_context());
  const auto& r = s.requests();
  std::printf("requests:  generate %llu, forward %llu, tokenize %llu, detokenize %llu, sessions %llu, verify %llu\n",
              (unsigned long long)r.generate(), (unsigned long long)r.forward(), (unsigned long long)r.tokenize(),
              (unsigned long long)r.detokenize(), (unsigned long long)r.sessions(), (unsigned long long)r.verify());
  std::printf("           errors %llu, cancelled %llu, rejected connections %llu, evicted sessions %llu\n",
              (unsigned long long)r.errors(), (unsigned long long)r.cancelled(),
              (unsigned long long)r.rejected_connections(), (unsigned long long)r.evicted_sessions());
  std::printf("tokens:    prompt %llu computed + %llu cached, completion %llu; %d active streams\n",
              (unsigned long long)r.prompt_tokens(), (unsigned long long)r.cached_tokens(),
              (unsigned long long)r.completion_tokens(), s.active_streams());
  std::printf("socket:    %s\n", s.socket_path().c_str());
  print_restart_needed(s);
}

// While waiting: an unavailable daemon (loading, being started) is waited
// for until the deadline; an unreachable one only for a short grace period
// (it may be creating its socket), and access errors never.
bool retry_while_waiting(const CliError& e, bool wait, Clock::time_point deadline) {
  static const auto grace_end = Clock::now() + std::chrono::seconds(10);
  if (!wait || Clock::now() > deadline) return false;
  if (e.exit_code() == kExitUnavailable) return true;
  return e.exit_code() == kExitNoDaemon && Clock::now() < grace_end;
}

std::string lowercase(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const OptionSpec kWait{"wait", false, false, "wait until the model is loaded (shows progress)"};
const OptionSpec kTimeout{"timeout", true, false, "SECONDS  give up waiting after this long (default 1800)"};

int run_status(Command& cmd) {
  const Args& a = cmd.args();
  if (!a.positional().empty()) throw usage_error("status takes no arguments");
  auto& client = cmd.client();
  const bool wait = a.has("wait");
  const auto deadline = Clock::now() + std::chrono::seconds(a.get_int("timeout", 1, 86400 * 7).value_or(1800));
  const bool tty = isatty(STDERR_FILENO);
  v1::GetStatusResponse s;
  bool showed_progress = false;
  for (;;) {
    try {
      s = get_status(client, wait);
    } catch (const CliError& e) {
      // A daemon that is still starting (socket activation) is worth waiting for.
      if (!retry_while_waiting(e, wait, deadline)) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      continue;
    }
    if (!wait || s.load_state() != v1::LOAD_STATE_LOADING) break;
    if (Clock::now() > deadline) throw CliError("still loading after --timeout; try again later", kExitUnavailable);
    if (!cmd.json()) {
      std::fprintf(stderr, tty ? "\rloading %3.0f%%  %-60.60s" : "loading %3.0f%%  %s\n", 100.0 * s.load_progress(),
                   s.load_message().c_str());
      showed_progress = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(tty ? 200 : 1000));
  }
  if (showed_progress && tty) std::fprintf(stderr, "\n");
  if (cmd.json()) std::cout << to_json(s) << "\n";
  else print_status(s);
  if (s.load_state() == v1::LOAD_STATE_FAILED) {
    std::cerr << "qwen3-bpf: model loading failed: " << s.load_message() << "\n";
    return kExitFailed;
  }
  return kExitOk;
}

int run_health(Command& cmd) {
  const Args& a = cmd.args();
  if (!a.positional().empty()) throw usage_error("health takes no arguments");
  auto& client = cmd.client();
  const bool wait = a.has("wait");
  const auto deadline = Clock::now() + std::chrono::seconds(a.get_int("timeout", 1, 86400 * 7).value_or(1800));
  ServingStatus st;
  for (;;) {
    try {
      st = health_check(client, a.get_or("service", ""));
    } catch (const CliError& e) {
      if (!retry_while_waiting(e, wait, deadline)) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      continue;
    }
    if (!wait || st == ServingStatus::serving || Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  if (cmd.json()) std::cout << dump_json({{"status", lowercase(to_string(st))}}) << "\n";
  else std::cout << to_string(st) << "\n";
  return st == ServingStatus::serving ? kExitOk : kExitUnavailable;
}

}  // namespace

CommandInfo status_command() {
  return CommandInfo{"status",
                     "model, load progress, memory, sessions (--wait)",
                     "status [--wait [--timeout S]] [--json]",
                     "Shows the daemon's model, load progress, backend, memory, sessions and counters.\n"
                     "With --wait, shows load progress until the model is ready (exit 1 if loading fails).",
                     {kWait, kTimeout},
                     run_status};
}

CommandInfo health_command() {
  return CommandInfo{"health",
                     "SERVING / NOT_SERVING (--wait)",
                     "health [--wait [--timeout S]] [--service NAME]",
                     "Asks the standard gRPC health service. Prints SERVING (exit 0) or NOT_SERVING\n"
                     "(exit 5, e.g. while the model loads). --wait waits for SERVING.",
                     {kWait, kTimeout, {"service", true, false, "NAME  service to ask about (default: the server)"}},
                     run_health};
}

}  // namespace qwen3::cli
