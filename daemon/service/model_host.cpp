#include "service/model_host.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "common/error.h"

#include "engine/bpf_backend.h"
#include "reference/reference_backend.h"

namespace qwen3 {

Runtime::~Runtime() {
  scheduler.reset();
  sessions.reset();
  backend.reset();
}

SessionLimits session_limits_from(const DaemonConfig& c, const ModelConfig& m) {
  SessionLimits l;
  l.max_sessions = c.max_sessions;
  l.kv_budget_bytes = static_cast<size_t>(c.kv_budget_mib) * 1024 * 1024;
  l.max_sessions_per_uid = c.max_sessions_per_uid;
  l.kv_budget_bytes_per_uid = static_cast<size_t>(c.kv_budget_mib_per_uid) * 1024 * 1024;
  l.ttl = std::chrono::seconds(c.session_ttl_seconds);
  l.max_context = c.max_context;
  if (m.max_position_embeddings > 0) l.max_context = std::min(l.max_context, m.max_position_embeddings);
  l.default_context = std::min(c.default_context, l.max_context);
  return l;
}

void check_model_dir_exists(const DaemonConfig& config) {
  const std::string dir = config.effective_model_dir();
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::path(dir) / "config.json", ec)) return;
  if (config.uses_default_model())
    throw not_found("no model_dir is configured and the default model " + dir +
                    " does not exist; unpack the shipped model there (`mkdir -p " + dir + " && tar -xJf " QWEN3_SHIPPED_MODEL
                    " -C " + dir + " --strip-components=1`, as scripts/quickstart.sh does) or set model_dir in " +
                    (config.config_file.empty() ? std::string("/etc/qwen3-bpfd/qwen3-bpfd.conf") : config.config_file));
  throw not_found("model directory " + dir + " has no config.json (check model_dir / --model)");
}

ModelHost::ModelHost(DaemonConfig config) : config_(std::move(config)) {
  progress_.text = "starting";
}

ModelHost::~ModelHost() {
  if (loader_.joinable()) loader_.join();
  unload();
}

void ModelHost::set_progress(LoadState state, float fraction, std::string text) {
  std::function<void(const LoadProgress&)> cb;
  LoadProgress copy;
  {
    std::lock_guard lock(mu_);
    progress_.state = state;
    progress_.fraction = std::clamp(fraction, 0.0f, 1.0f);
    progress_.text = std::move(text);
    copy = progress_;
    cb = on_change_;
  }
  if (cb) cb(copy);
}

LoadProgress ModelHost::progress() const {
  std::lock_guard lock(mu_);
  return progress_;
}

Runtime& ModelHost::runtime() {
  if (Runtime* r = ready_.load()) return *r;
  const auto p = progress();
  if (p.state == LoadState::failed) throw unavailable("the model failed to load: " + p.text);
  char pct[16];
  snprintf(pct, sizeof pct, "%.0f%%", p.fraction * 100.0);
  throw unavailable(std::string("the model is still loading (") + pct + ": " + p.text +
                    "); retry when `qwen3-bpf health` reports SERVING");
}

Runtime* ModelHost::runtime_if_ready() { return ready_.load(); }

void ModelHost::start_loading(std::function<void(const LoadProgress&)> on_change) {
  {
    std::lock_guard lock(mu_);
    on_change_ = std::move(on_change);
  }
  loader_ = std::thread([this] {
    try {
      load_impl();
    } catch (const std::exception& e) {
      spdlog::error("loading failed: {}", e.what());
      set_progress(LoadState::failed, 0.0f, e.what());
    }
  });
}

void ModelHost::load_now(const std::function<void(const LoadProgress&)>& on_change) {
  {
    std::lock_guard lock(mu_);
    on_change_ = on_change;
  }
  try {
    load_impl();
  } catch (const std::exception& e) {
    set_progress(LoadState::failed, 0.0f, e.what());
    throw;
  }
}

void ModelHost::unload() {
  ready_.store(nullptr);
  std::unique_ptr<Runtime> r;
  {
    std::lock_guard lock(mu_);
    r = std::move(runtime_);
  }
  r.reset();
}

void ModelHost::load_impl() {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = config_.effective_model_dir();
  if (const char* delay = std::getenv("QWEN3_BPFD_LOAD_DELAY_MS")) {
    // Testing aid: keeps the daemon in the loading state long enough for a
    // client to observe it (NOT_SERVING, progress, UNAVAILABLE).
    set_progress(LoadState::loading, 0.0f, "delaying the load (QWEN3_BPFD_LOAD_DELAY_MS)");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay)));
  }
  set_progress(LoadState::loading, 0.01f, "checking model directory " + dir);
  check_model_dir_exists(config_);
  if (config_.uses_default_model())
    spdlog::info("no model_dir configured: serving the default model {}", dir);

  auto rt = std::make_unique<Runtime>();
  set_progress(LoadState::loading, 0.02f, "opening model " + dir);
  rt->model = ModelDir::open(dir);
  set_progress(LoadState::loading, 0.05f, "loading tokenizer from " + dir);
  rt->tokenizer = Tokenizer::load(dir);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  rt->threads = config_.threads > 0 ? config_.threads : static_cast<int>(std::max(1L, cpus));

  if (config_.backend == "reference") {
    spdlog::warn("backend = reference: the float user-space forward pass (a debugging aid); the product runs it "
                 "in the kernel with backend = bpf");
    set_progress(LoadState::loading, 0.1f, "preparing the reference (float, user space) backend");
    rt->backend = make_reference_backend(rt->model, rt->threads);
  } else {
    BpfEngineOptions opts;
    opts.weight_path = parse_weight_path(config_.weight_path);
    opts.precision = parse_precision(config_.precision);
    opts.kv_bits = config_.kv_bits;
    opts.kv_budget_bytes = uint64_t(config_.kv_budget_mib) << 20;  // checked against the memory limit at load
    opts.threads = rt->threads;
    opts.kernel_driver = config_.driver != "user";  // auto loads it for requests that ask (docs/kernel-driver.md)
    opts.max_context = session_limits_from(config_, rt->model->config()).max_context;
    opts.progress = [this](double fraction, const std::string& what) {
      set_progress(LoadState::loading, 0.1f + 0.88f * static_cast<float>(fraction), what);
    };
    set_progress(LoadState::loading, 0.1f,
                 "loading BPF programs and converting weights (" + config_.weight_path + ", " + config_.precision + ")");
    rt->backend = make_bpf_backend(rt->model, opts);
  }

  const ModelConfig& mc = rt->backend->config();
  if (rt->tokenizer->vocab_size() > mc.vocab_size)
    spdlog::warn("the tokenizer knows {} ids but the model's vocab_size is {}: ids beyond it are rejected",
                 rt->tokenizer->vocab_size(), mc.vocab_size);
  rt->sessions = std::make_unique<SessionManager>(*rt->backend, session_limits_from(config_, mc));
  SchedulerOptions so;
  so.prefill_chunk = config_.prefill_chunk;
  so.max_batch_tokens = std::max(config_.prefill_chunk * 4, 64);
  rt->scheduler = std::make_unique<Scheduler>(*rt->backend, so);

  const auto info = rt->backend->info();
  for (const std::string& w : info.load_warnings) spdlog::warn("{}", w);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string text = "ready: " + dir + (config_.uses_default_model() ? " (default model)" : "") + ", backend " +
                     info.name + " (" + info.weight_path + ", " + info.precision + ")";
  if (info.name == "bpf") text += ", " + std::to_string(info.bpf_programs) + " BPF programs, " +
                                  std::to_string(info.bpf_maps) + " maps";
  char t[32];
  snprintf(t, sizeof t, ", loaded in %.1f s", secs);
  text += t;
  if (before_ready_) before_ready_(*rt);
  {
    std::lock_guard lock(mu_);
    runtime_ = std::move(rt);
    ready_.store(runtime_.get());
  }
  set_progress(LoadState::ready, 1.0f, text);
  spdlog::info("{}", text);
}

}  // namespace qwen3
