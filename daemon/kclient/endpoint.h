// The BPF side of kernel clients, loaded and owned by the daemon: the XDP
// program of the UDP endpoint (attached only when an endpoint is configured),
// the submission ring, the result slots (mmapped) and the session index,
// optionally pinned in a bpffs directory for other BPF programs. One RAII
// owner: destroying it detaches the program, unpins and closes everything.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

struct qk_result_slot;
struct kclient_xdp;

namespace qwen3::kclient {

struct EndpointOptions {
  std::string iface;        // "" : load the maps, attach nothing
  int port = 0;
  uint32_t rate_per_sec = 0;
  std::string pin_dir;      // "" : nothing pinned
};

// The counters of the XDP program, summed over CPUs (enum qk_counter).
struct BpfCounters {
  uint64_t malformed = 0, rate_limited = 0, shed = 0, submitted = 0, polls = 0, cancels = 0;
};

class KernelEndpoint {
 public:
  // Throws qwen3::Error naming the interface, the directory or the libbpf error.
  explicit KernelEndpoint(const EndpointOptions& options);
  ~KernelEndpoint();
  KernelEndpoint(const KernelEndpoint&) = delete;
  KernelEndpoint& operator=(const KernelEndpoint&) = delete;

  int submit_ring_fd() const;
  int sessions_map_fd() const;
  qk_result_slot* slots() const { return slots_; }
  BpfCounters counters() const;
  bool attached() const { return link_fd_ >= 0; }

 private:
  void release();
  void pin_maps();
  void unpin_maps();

  EndpointOptions options_;
  kclient_xdp* skel_ = nullptr;
  int link_fd_ = -1;
  qk_result_slot* slots_ = nullptr;
  size_t slots_bytes_ = 0;
  bool pinned_ = false;
};

// The pinned names under the pin directory.
inline constexpr const char* kPinnedMaps[] = {"qk_submit", "qk_results", "qk_sessions", "qk_counters"};

}  // namespace qwen3::kclient
