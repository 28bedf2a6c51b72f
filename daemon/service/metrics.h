// What the daemon counts and measures, shared by the gRPC and HTTP adapters and
// the inference core, and its Prometheus text exposition (format 0.0.4:
// https://prometheus.io/docs/instrumenting/exposition_formats/).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <sstream>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace qwen3 {

// The exposition's writer, for every section of /metrics (the kernel clients' too):
// the HELP and TYPE lines of a family, and one sample (`name` with its labels).
void metric_header(std::ostringstream& out, const char* name, const char* type, const char* help);
void metric_sample(std::ostringstream& out, const std::string& name, double value);

// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Gauges read at scrape time from the loaded runtime and the transports.
struct MetricsGauges {
  bool loaded = false;
  uint64_t kv_bytes = 0, kv_budget_bytes = 0;
  int sessions = 0, ephemeral_sessions = 0, busy_sessions = 0, max_sessions = 0;
  int queue_depth = 0;
  int bpf_programs = 0, bpf_maps = 0;
  uint64_t evicted_sessions = 0;
  int active_streams = 0;
  int http_connections = 0;
  uint64_t http_rejected_connections = 0;
  uint64_t grpc_rejected_connections = 0;
};

class ServiceMetrics {
 public:
  ServiceMetrics();

  // One finished request: `api` "grpc" | "http", `endpoint` the method or path,
  // `status` the gRPC code name or the HTTP status.
  void count_request(const std::string& api, const std::string& endpoint, const std::string& status);
  void count_tokens(int prompt_computed, int cached, int completion);
  // Speculative decoding: draft tokens verified and, of those, accepted.
  void count_speculative(int drafted, int accepted);
  void count_kernel_driven(int tokens);  // a generation the kernel driver decoded (docs/kernel-driver.md)
  void observe_time_to_first_token(double seconds) { ttft_.observe(seconds); }
  void observe_time_per_output_token(double seconds) { tpot_.observe(seconds); }

  // More exposition text from a part of the daemon above the core (kernel
  // clients), made at every scrape and appended to render()'s.
  void add_section(std::function<std::string()> section);

  // The whole exposition text.
  std::string render(const MetricsGauges& gauges) const;

 private:
  mutable std::mutex mu_;
  std::map<std::array<std::string, 3>, uint64_t> requests_;
  std::atomic<uint64_t> prompt_tokens_{0}, cached_tokens_{0}, completion_tokens_{0};
  std::atomic<uint64_t> draft_tokens_{0}, accepted_tokens_{0};
  std::atomic<uint64_t> kernel_generations_{0}, kernel_tokens_{0};
  Histogram ttft_, tpot_;
  std::vector<std::function<std::string()>> sections_;  // guarded by mu_
};

// "a\"b" -> a\"b with \\, \" and \n escaped, as label values must be.
std::string escape_label_value(const std::string& v);

}  // namespace qwen3
