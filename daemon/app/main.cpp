// qwen3-bpfd: serves a Qwen3 model whose forward pass runs in verified eBPF
// programs, over gRPC on a Unix socket. See docs/daemon.md.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_posix.h>
#include <signal.h>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "app/flags.h"
#include "app/logging.h"
#include "app/notify.h"
#include "app/reload.h"
#include "common/error.h"
#include "http/http_api.h"
#include "kclient/broker.h"
#include "service/config.h"
#include "service/config_reload.h"
#include "grpc/grpc_service.h"
#include "listener/listener.h"
#include "service/model_host.h"
#include "service/self_check.h"
#include "service/session_store.h"

namespace {

using namespace qwen3;

std::string percent(float f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", f * 100.0);
  return buf;
}

// The main thread's loop: SIGHUP reloads, SIGTERM/SIGINT or a failed load end
// it (the exit code), and idle sessions expire every 5 s.
int run_until_stopped(const sigset_t& signals, const Flags& flags, DaemonConfig& config, ModelHost& host,
                      Listener& listener, InferenceCore& core, RestartNeeded& restart_needed) {
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
  return exit_code;
}

// Running streams end with finish_reason CANCELLED within one engine step; give
// the clients a moment to read their final message before the connections close.
void finish_running_streams(InferenceCore& core) {
  const int streams = core.counters().active_streams;
  if (streams > 0) {
    spdlog::info("finishing {} running stream(s) with finish_reason CANCELLED", streams);
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (core.counters().active_streams > 0 && std::chrono::steady_clock::now() < limit)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
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
  Listener listener({config.socket_path, config.socket_group, config.admin_group, config.grpc_max_connections});
  InferenceCore core(host);
  RestartNeeded restart_needed;
  Qwen3BpfService service(core, &listener, &restart_needed);
  http::HttpApi http_api(config, core, listener, http_sockets);
  // Kernel clients (udp_endpoint, kernel_client_pin_dir): off unless configured.
  std::unique_ptr<kclient::Broker> kclients;
  if (auto o = kclient::broker_options_from(config)) {
    o->runtime = [&host] { return host.runtime_if_ready(); };  // the kernel path, once loaded
    kclients = std::make_unique<kclient::Broker>(core, std::move(*o));
    kclients->start();
  }

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
  listener.start([srv = server.get()](int conn) { grpc::AddInsecureChannelFromFd(srv, conn); });
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

  const int exit_code = run_until_stopped(signals, flags, config, host, listener, core, restart_needed);

  notify_stopping();
  health->SetServingStatus(false);
  core.begin_shutdown();
  listener.stop();
  finish_running_streams(core);
  http_api.stop(std::chrono::seconds(2));
  if (kclients) kclients->stop();
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
