// The daemon side of kernel clients: reads the submission ring by epoll,
// gives each request a result slot, queues it (bounded: a full queue answers
// QK_E_BUSY) and runs it on a few worker threads through the inference core,
// on a real session owned by kernel_client_uid, writing tokens to the slot
// as they come. docs/kernel-clients.md.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kclient/endpoint.h"
#include "kclient/kernel_path.h"
#include "kclient/request.h"
#include "kclient/result_slots.h"

struct ring_buffer;

namespace qwen3 {
class InferenceCore;
struct DaemonConfig;
struct Runtime;
}  // namespace qwen3

namespace qwen3::kclient {

struct BrokerOptions {
  EndpointOptions endpoint;
  uint32_t owner_uid = 65534;
  int workers = 4;        // generations of kernel clients running at once
  size_t max_queued = 32; // requests waiting for a worker; more: QK_E_BUSY
  // The loaded runtime or nullptr (set by the daemon): with a pin directory,
  // the kernel path (kernel_path.h) is enabled once it is ready.
  std::function<Runtime*()> runtime;
};

// What the daemon counts in user space (the XDP program counts the rest).
struct BrokerCounters {
  std::atomic<uint64_t> served{0};     // finished: length, eos, stop or cancelled
  std::atomic<uint64_t> cancelled{0};  // of those, cancelled
  std::atomic<uint64_t> failed{0};     // ended with an error code in the slot
  std::atomic<uint64_t> busy{0};       // queue full: QK_E_BUSY
  std::atomic<uint64_t> no_slot{0};    // every result slot running, or the session's request still running
  std::atomic<uint64_t> invalid{0};    // ring records that failed the user-space check
  std::atomic<uint64_t> tokens{0};     // tokens generated
};

// The broker's options from the configuration; nullopt when kernel clients are off
// (no udp_endpoint and no kernel_client_pin_dir).
std::optional<BrokerOptions> broker_options_from(const DaemonConfig& config);

class Broker {
 public:
  Broker(InferenceCore& core, BrokerOptions options);
  ~Broker();
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Loads (and attaches) the BPF side and starts the threads. Throws qwen3::Error.
  void start();
  // Ends the threads (running generations end within a token), detaches the endpoint.
  void stop();

  // The Prometheus text of the counters (BPF and user space).
  std::string metrics_text() const;

 private:
  struct Job {
    KernelRequest request;
    int slot = -1;
  };
  static int on_record(void* ctx, void* data, size_t size);
  void accept(const void* data, size_t size);
  void read_loop();
  void work_loop();
  void run(Job& job);

  InferenceCore& core_;
  BrokerOptions options_;
  std::unique_ptr<KernelEndpoint> endpoint_;
  std::unique_ptr<ResultSlots> slots_;
  std::unique_ptr<KernelPath> kernel_path_;
  ring_buffer* ring_ = nullptr;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread reader_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  BrokerCounters counters_;
};

}  // namespace qwen3::kclient
