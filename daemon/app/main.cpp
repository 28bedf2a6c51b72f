// qwen3-bpfd: serves a Qwen3 model whose forward pass runs in verified eBPF
// programs, over gRPC on a Unix socket. See docs/daemon.md.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cli_parse.h"
#include "common/error.h"
#include "http/http_api.h"
#include "service/config.h"
#include "service/config_docs.h"
#include "service/config_keys.h"
#include "service/config_reload.h"
#include "service/grpc_service.h"
#include "service/listener.h"
#include "app/logging.h"
#include "service/model_host.h"
#include "app/notify.h"
#include "service/self_check.h"
#include "service/session_store.h"

namespace {

using namespace qwen3;

constexpr const char* kDefaultConfig = "/etc/qwen3-bpfd/qwen3-bpfd.conf";

struct Flags {
  std::string config_file;
  bool config_given = false;
  bool check = false;
  std::vector<std::pair<std::string, std::string>> overrides;  // config key -> value
};

// Returns the flags, or exits (0 after --help/--version/--print-config, 2 on a usage error).
Flags parse_flags(int argc, char** argv) {
  Flags f;
  f.config_file = kDefaultConfig;
  CLI::App app{"Serves a Qwen3 model whose forward pass runs in verified eBPF programs, over gRPC on a Unix\n"
               "socket. Options override the configuration file's keys (docs/daemon.md)."};
  qwen3::cli_parse::init(app, "qwen3-bpfd");
  app.add_option("--config", f.config_file, "configuration file (a missing default is fine)")->capture_default_str();
  // The keys of the table that have a flag (config_keys.cpp).
  std::vector<const ConfigKey*> keyed;
  for (const auto& k : config_keys())
    if (!k.flag.empty()) keyed.push_back(&k);
  std::vector<std::string> values(keyed.size());
  std::vector<CLI::Option*> options;
  for (size_t i = 0; i < keyed.size(); ++i)
    options.push_back(app.add_option(keyed[i]->flag, values[i], flag_help(*keyed[i])));
  bool foreground = false;  // accepted and ignored
  app.add_flag("--foreground", foreground, "accepted for compatibility; the daemon never forks");
  app.add_flag("--check", f.check, "load everything, run a short self-test, exit 0 (ok) or 1");
  bool print_config = false;
  app.add_flag("--print-config", print_config,
               "print the commented configuration file (every key at its default) and exit");
  if (int rc = qwen3::cli_parse::parse(app, argc, argv); rc >= 0) std::exit(rc);
  if (print_config) {
    std::fputs(config_file_text().c_str(), stdout);
    std::exit(0);
  }
  f.config_given = app.count("--config") > 0;
  for (size_t i = 0; i < keyed.size(); ++i)
    if (options[i]->count() > 0) f.overrides.emplace_back(keyed[i]->name, values[i]);
  return f;
}

DaemonConfig read_config(const Flags& flags) {
  DaemonConfig c;
  load_config_file(flags.config_file, c, flags.config_given);
  for (const auto& [key, value] : flags.overrides) set_config_value(c, key, value, "command line (" + key + ")");
  validate_config(c);
  return c;
}

std::string percent(float f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", f * 100.0);
  return buf;
}

// SIGHUP: apply the keys the table marks OnReload::apply, keep the others and
// say which of them need a restart (log, and GetStatus through `restart_needed`).
void reload(const Flags& flags, DaemonConfig& current, ModelHost& host, Listener& listener, InferenceCore& core,
            RestartNeeded& restart_needed) {
  // RELOADING=1 must be followed by READY=1: only once loaded (before that,
  // READY=1 would tell systemd the model is loaded when it is not).
  const bool loaded = host.progress().state == LoadState::ready;
  if (loaded) notify_reloading();
  DaemonConfig on_disk;
  try {
    on_disk = read_config(flags);
  } catch (const std::exception& e) {
    spdlog::error("reload: configuration rejected, keeping the running one: {}", e.what());
    if (loaded) notify_ready(host.progress().text + " (last reload failed: " + e.what() + ")");
    return;
  }
  ReloadPlan plan = plan_reload(current, on_disk);
  const DaemonConfig& next = plan.next;
  set_log_level(next.log_level);
  if (Runtime* rt = host.runtime_if_ready()) rt->sessions->set_limits(session_limits_from(next, rt->backend->config()));
  listener.set_groups(next.socket_group, next.admin_group);
  core.set_default_max_new_tokens(next.default_max_new_tokens);
  core.set_default_speculative(next.speculative);
  current = next;
  restart_needed.set(plan.restart_needed);

  if (plan.applied.empty() && plan.restart_needed.empty()) spdlog::info("reload: configuration unchanged");
  for (const auto& c : plan.applied) spdlog::info("reload: {}", change_text(c));
  for (const auto& c : plan.restart_needed)
    spdlog::warn("reload: {} needs a restart (systemctl restart qwen3-bpfd); not applied, {} stays in force",
                 change_text(c), c.in_force.empty() ? "\"\"" : c.in_force);
  if (loaded) notify_ready(host.progress().text);
}

int serve(const Flags& flags, DaemonConfig config) {
  // Signals are taken synchronously by the main thread; every other thread has them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  spdlog::info("qwen3-bpfd {} starting (config {})", QWEN3_BPFD_VERSION,
               config.config_file.empty() ? "built-in defaults" : config.config_file);
  if (config.uses_default_model())
    spdlog::info("no model_dir configured: the default model {} will be served", config.effective_model_dir());
  check_model_dir_exists(config);

  ModelHost host(config);
  // Before the gRPC listener looks at what systemd passed.
  const http::ActivatedSockets http_sockets = http::take_activated_http_sockets();
  Listener listener({config.socket_path, config.socket_group, config.admin_group});
  InferenceCore core(host);
  RestartNeeded restart_needed;
  Qwen3BpfService service(core, &listener, &restart_needed);
  http::HttpApi http_api(config, core, listener, http_sockets);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  builder.SetMaxSendMessageSize(64 * 1024 * 1024);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) throw Error("gRPC server failed to start");
  auto* health = server->GetHealthCheckService();
  health->SetServingStatus(false);
  listener.start(server.get());
  http_api.start();

  WatchdogPinger watchdog;
  notify_status("loading " + config.effective_model_dir());
  SessionPersistence persistence(config.state_dir + "/sessions.json");
  if (config.persist_sessions) {
    // The saved sessions are recreated (as restoring) before READY, so no request can find one
    // missing or take its id; their KV is recomputed in the background while the daemon serves,
    // then every change of a named session is saved as it happens.
    host.set_before_ready([&persistence, &core](Runtime& rt) {
      persistence.start(*rt.sessions, *rt.scheduler, rt.backend->config().vocab_size,
                        [&core] { return core.shutting_down(); });
    });
  }
  host.start_loading([&](const LoadProgress& p) {
    if (p.state == LoadState::ready) {
      health->SetServingStatus(true);
      notify_ready(p.text);
    } else if (p.state == LoadState::loading) {
      notify_status("loading " + percent(p.fraction) + ": " + p.text);
    } else {
      notify_status("load failed: " + p.text);
    }
  });

  int exit_code = 0;
  auto last_sweep = std::chrono::steady_clock::now();
  for (;;) {
    timespec timeout{0, 200 * 1000 * 1000};
    const int sig = sigtimedwait(&signals, nullptr, &timeout);
    if (sig == SIGHUP) {
      spdlog::info("SIGHUP: re-reading {}", flags.config_file);
      reload(flags, config, host, listener, core, restart_needed);
      continue;
    }
    if (sig == SIGTERM || sig == SIGINT) {
      spdlog::info("{}: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      break;
    }
    if (host.progress().state == LoadState::failed) {
      spdlog::critical("cannot serve: {}", host.progress().text);
      exit_code = 1;
      break;
    }
    if (std::chrono::steady_clock::now() - last_sweep > std::chrono::seconds(5)) {
      last_sweep = std::chrono::steady_clock::now();
      if (Runtime* rt = host.runtime_if_ready()) rt->sessions->expire_idle();
    }
  }

  notify_stopping();
  health->SetServingStatus(false);
  core.begin_shutdown();
  listener.stop();
  const int streams = core.counters().active_streams;
  if (streams > 0) {
    spdlog::info("finishing {} running stream(s) with finish_reason CANCELLED", streams);
    // Each stream ends within one engine step; give the clients a moment to read
    // their final message before the connections close under them.
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (core.counters().active_streams > 0 && std::chrono::steady_clock::now() < limit)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  http_api.stop(std::chrono::seconds(2));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();
  if (host.progress().state == LoadState::loading) {
    // Loading cannot be interrupted and may take minutes for a large model; the
    // kernel frees the programs and maps loaded so far when the process exits.
    spdlog::info("stopped while loading; exiting without waiting for the load to finish");
    if (!listener.activated()) ::unlink(listener.path().c_str());
    spdlog::default_logger()->flush();
    std::_Exit(exit_code);
  }
  persistence.stop();
  host.unload();
  spdlog::info("stopped");
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  DaemonConfig config;
  try {
    flags = parse_flags(argc, argv);
    config = read_config(flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qwen3-bpfd: %s\n", e.what());
    return 2;
  }
  try {
    setup_logging(config.log_level);
    if (flags.check) return run_self_check(config);
    return serve(flags, config);
  } catch (const std::exception& e) {
    spdlog::critical("{}", e.what());
    return 1;
  }
}
