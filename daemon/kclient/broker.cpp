#include "kclient/broker.h"

#include <bpf/libbpf.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "kclient_abi.h"
#include "service/config.h"
#include "service/inference.h"

namespace qwen3::kclient {

std::optional<BrokerOptions> broker_options_from(const DaemonConfig& c) {
  if (c.udp_endpoint.empty() && c.kernel_client_pin_dir.empty()) return std::nullopt;
  BrokerOptions o;
  if (!c.udp_endpoint.empty()) {  // validated by the config table: IFACE:PORT
    const auto colon = c.udp_endpoint.rfind(':');
    o.endpoint.iface = c.udp_endpoint.substr(0, colon);
    o.endpoint.port = std::stoi(c.udp_endpoint.substr(colon + 1));
  }
  o.endpoint.rate_per_sec = static_cast<uint32_t>(c.udp_rate_limit);
  o.endpoint.pin_dir = c.kernel_client_pin_dir;
  o.owner_uid = static_cast<uint32_t>(c.kernel_client_uid);
  return o;
}

Broker::Broker(InferenceCore& core, BrokerOptions options) : core_(core), options_(std::move(options)) {}

Broker::~Broker() {
  stop();
  if (ring_) ring_buffer__free(ring_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Broker::start() {
  endpoint_ = std::make_unique<KernelEndpoint>(options_.endpoint);
  slots_ = std::make_unique<ResultSlots>(endpoint_->slots(), endpoint_->sessions_map_fd());
  ring_ = ring_buffer__new(endpoint_->submit_ring_fd(), &Broker::on_record, this, nullptr);
  if (!ring_) throw Error("kernel clients: cannot read the submission ring: " + std::string(std::strerror(errno)));
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw Error("kernel clients: eventfd: " + std::string(std::strerror(errno)));
  if (!options_.endpoint.pin_dir.empty() && options_.runtime)
    kernel_path_ = std::make_unique<KernelPath>(options_.runtime, options_.endpoint.pin_dir, options_.owner_uid);
  core_.metrics().add_section([this] { return metrics_text(); });
  reader_ = std::thread([this] { read_loop(); });
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { work_loop(); });
}

void Broker::stop() {
  if (stopping_.exchange(true)) return;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }
  cv_.notify_all();
  if (reader_.joinable()) reader_.join();
  if (kernel_path_) kernel_path_->stop();
  for (auto& w : workers_)
    if (w.joinable()) w.join();
  workers_.clear();
  // The requests never started end with "unavailable" in their slots.
  for (Job& job : queue_) slots_->fail(job.slot, job.request.request_id, QK_E_UNAVAILABLE);
  queue_.clear();
}

int Broker::on_record(void* ctx, void* data, size_t size) {
  static_cast<Broker*>(ctx)->accept(data, size);
  return 0;
}

void Broker::accept(const void* data, size_t size) {
  KernelRequest request;
  try {
    request = decode_submission(*static_cast<const qk_submission*>(data), size);
  } catch (const Error& e) {
    ++counters_.invalid;
    spdlog::debug("kernel clients: submission dropped: {}", e.what());
    return;
  }
  const int slot = slots_->claim(request.session, request.request_id);
  if (slot < 0) {
    ++counters_.no_slot;
    spdlog::debug("kernel clients: no result slot for session {} (all running, or its request still runs)",
                  request.session);
    return;
  }
  std::lock_guard lock(mu_);
  if (queue_.size() >= options_.max_queued) {
    ++counters_.busy;
    slots_->fail(slot, request.request_id, QK_E_BUSY);
    return;
  }
  queue_.push_back({std::move(request), slot});
  cv_.notify_one();
}

void Broker::read_loop() {
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = ring_buffer__epoll_fd(ring_);
  epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev);
  ev.data.fd = wake_fd_;
  epoll_ctl(ep, EPOLL_CTL_ADD, wake_fd_, &ev);
  while (!stopping_) {
    epoll_event got[2];
    if (kernel_path_) kernel_path_->poll();  // enabled once the model is ready
    const int n = epoll_wait(ep, got, 2, kernel_path_ && !kernel_path_->enabled() ? 100 : 1000);
    if (n < 0 && errno != EINTR) {
      spdlog::error("kernel clients: epoll_wait: {}", std::strerror(errno));
      break;
    }
    if (stopping_) break;
    ring_buffer__consume(ring_);
  }
  ::close(ep);
}

void Broker::work_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    run(job);
  }
}

}  // namespace qwen3::kclient
