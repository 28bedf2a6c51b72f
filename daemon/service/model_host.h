// Loads the model, tokenizer and backend (in the background while the socket
// already answers) and owns everything that exists once loaded: the backend,
// the session table and the engine thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/backend.h"
#include "model/model_dir.h"
#include "scheduler/scheduler.h"
#include "service/config.h"
#include "sessions/session_manager.h"
#include "tokenizer/tokenizer.h"

namespace qwen3 {

enum class LoadState { loading, ready, failed };

struct LoadProgress {
  LoadState state = LoadState::loading;
  float fraction = 0.0f;
  std::string text;
};

// Everything a request needs; exists only once loading succeeded.
struct Runtime {
  std::shared_ptr<const ModelDir> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<SessionManager> sessions;
  std::unique_ptr<Scheduler> scheduler;
  int threads = 0;
  // Destroys in dependency order: engine thread, sessions (KV), backend.
  ~Runtime();
};

SessionLimits session_limits_from(const DaemonConfig& config, const ModelConfig& model);

class ModelHost {
 public:
  explicit ModelHost(DaemonConfig config);
  ~ModelHost();

  // Called on the loading thread with the finished runtime just before it is published (and READY
  // sent), so what it sets up (the saved sessions) exists from the first request on. Set before
  // loading starts.
  void set_before_ready(std::function<void(Runtime&)> hook) { before_ready_ = std::move(hook); }
  // Loads on a background thread; `on_change` is called with every progress update.
  void start_loading(std::function<void(const LoadProgress&)> on_change);
  // Loads on this thread. Throws qwen3::Error.
  void load_now(const std::function<void(const LoadProgress&)>& on_change = {});

  LoadProgress progress() const;
  // Throws unavailable while loading (with the progress) or after a failure.
  Runtime& runtime();
  Runtime* runtime_if_ready();
  const DaemonConfig& config() const { return config_; }
  // Drops the runtime (frees sessions, KV and programs) — shutdown.
  void unload();

 private:
  void set_progress(LoadState state, float fraction, std::string text);
  void load_impl();

  DaemonConfig config_;
  mutable std::mutex mu_;
  LoadProgress progress_;
  std::function<void(const LoadProgress&)> on_change_;
  std::function<void(Runtime&)> before_ready_;
  std::unique_ptr<Runtime> runtime_;
  std::atomic<Runtime*> ready_{nullptr};
  std::thread loader_;
};

// Throws not_found with how to generate the default model when `dir` is missing.
void check_model_dir_exists(const DaemonConfig& config);

}  // namespace qwen3
