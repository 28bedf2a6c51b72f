#include "kclient/kernel_path.h"

#include <spdlog/spdlog.h>

#include "engine/kernel_door.h"
#include "kclient_abi.h"
#include "service/metrics.h"
#include "service/model_host.h"
#include "tokenizer/tokenizer.h"

namespace qwen3::kclient {

void kernel_tables(const Tokenizer& tok, int vocab, engine::KernelDoorConfig& out) {
  out.byte_ids.fill(-1);
  const int n = std::min(vocab, tok.vocab_size());
  out.token_text.assign(size_t(n), std::string());
  for (int id = 0; id < n; id++) {
    if (tok.is_special(id)) continue;
    std::string b = tok.token_bytes(id);
    if (b.size() == 1 && out.byte_ids[uint8_t(b[0])] < 0) out.byte_ids[uint8_t(b[0])] = id;
    out.token_text[size_t(id)] = std::move(b);
  }
}

KernelPath::KernelPath(std::function<Runtime*()> runtime, std::string pin_dir, uint32_t owner_uid)
    : runtime_(std::move(runtime)), pin_dir_(std::move(pin_dir)), owner_uid_(owner_uid) {}

KernelPath::~KernelPath() { stop(); }

void KernelPath::poll() {
  if (door_.load() || failed_ || !runtime_) return;
  Runtime* rt = runtime_();
  if (!rt || !rt->backend) return;
  engine::KernelDoor* door = rt->backend->kernel_door();
  if (!door) {
    failed_ = true;
    spdlog::info("kernel clients: no kernel path (driver = user, or not the bpf backend): BPF clients go "
                 "through the broker");
    return;
  }
  try {
    engine::KernelDoorConfig c;
    c.pin_dir = pin_dir_;
    c.owner_uid = owner_uid_;
    const ModelConfig& mc = rt->backend->config();
    kernel_tables(*rt->tokenizer, mc.vocab_size, c);
    c.stop_ids = mc.eos_token_ids;
    door->enable(c);
    door_.store(door);
    spdlog::info("kernel clients: kernel path enabled: {} sessions of {} positions, maps pinned in {}",
                 QK_KD_SESSIONS, c.kv_positions, pin_dir_);
  } catch (const std::exception& e) {
    failed_ = true;
    spdlog::error("kernel clients: the kernel path stays off: {}", e.what());
  }
}

void KernelPath::stop() {
  if (engine::KernelDoor* d = door_.exchange(nullptr)) {
    try {
      d->disable();
    } catch (const std::exception& e) {
      spdlog::warn("kernel clients: disabling the kernel path: {}", e.what());
    }
  }
}

std::string KernelPath::metrics_text() const {
  engine::KernelDoor* d = door_.load();
  if (!d) return "";
  const engine::KernelDoorCounters c = d->counters();
  std::ostringstream out;
  metric_header(out, "qwen3_bpfd_kclient_kernel_requests_total", "counter",
                "Kernel-path requests (doorbell) by what the kernel did with them.");
  metric_sample(out, "qwen3_bpfd_kclient_kernel_requests_total{outcome=\"started\"}", double(c.started));
  metric_sample(out, "qwen3_bpfd_kclient_kernel_requests_total{outcome=\"served\"}", double(c.served));
  metric_sample(out, "qwen3_bpfd_kclient_kernel_requests_total{outcome=\"refused\"}", double(c.refused));
  metric_sample(out, "qwen3_bpfd_kclient_kernel_requests_total{outcome=\"shed\"}", double(c.shed));
  metric_header(out, "qwen3_bpfd_kclient_kernel_busy_total", "counter",
                "Doorbell rings that found the engine held by the daemon (retried after 1 ms).");
  metric_sample(out, "qwen3_bpfd_kclient_kernel_busy_total", double(c.busy));
  metric_header(out, "qwen3_bpfd_kclient_kernel_daemon_waits_total", "counter",
                "Daemon passes that waited for a kernel-started generation.");
  metric_sample(out, "qwen3_bpfd_kclient_kernel_daemon_waits_total", double(c.daemon_waits));
  metric_header(out, "qwen3_bpfd_kclient_kernel_yields_total", "counter",
                "Kernel-started generations paused at a token boundary for the daemon (resumed first).");
  metric_sample(out, "qwen3_bpfd_kclient_kernel_yields_total", double(c.yields));
  metric_header(out, "qwen3_bpfd_kclient_kernel_tokens_total", "counter", "Tokens of kernel-started generations.");
  metric_sample(out, "qwen3_bpfd_kclient_kernel_tokens_total", double(c.tokens));
  metric_header(out, "qwen3_bpfd_kclient_kernel_pending", "gauge", "Kernel-path requests waiting for the engine.");
  metric_sample(out, "qwen3_bpfd_kclient_kernel_pending", double(c.pending));
  return out.str();
}

}  // namespace qwen3::kclient
