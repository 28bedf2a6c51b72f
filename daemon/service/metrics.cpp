#include "service/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace qwen3 {

namespace {

// Go's strconv.ParseFloat reads all of these; +Inf/-Inf/NaN are spelled as the format says.
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // Shortest form that reads back the same (keeps the output readable).
  for (int precision = 1; precision < 17; ++precision) {
    char shorter[32];
    std::snprintf(shorter, sizeof shorter, "%.*g", precision, v);
    if (std::strtod(shorter, nullptr) == v) return shorter;
  }
  return buf;
}

void header(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

void sample(std::ostringstream& out, const char* name, double value) { out << name << ' ' << number(value) << '\n'; }

void histogram(std::ostringstream& out, const char* name, const char* help, const Histogram::Snapshot& h) {
  header(out, name, "histogram", help);
  for (size_t i = 0; i <= h.bounds.size(); ++i) {
    out << name << "_bucket{le=\"" << (i < h.bounds.size() ? number(h.bounds[i]) : "+Inf") << "\"} "
        << h.cumulative[i] << '\n';
  }
  out << name << "_sum " << number(h.sum) << '\n' << name << "_count " << h.count << '\n';
}

}  // namespace

void metric_header(std::ostringstream& out, const char* name, const char* type, const char* help) {
  header(out, name, type, help);
}

void metric_sample(std::ostringstream& out, const std::string& name, double value) {
  out << name << ' ' << number(value) << '\n';
}

std::string escape_label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  std::lock_guard lock(mu_);
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();  // le: value <= bound
  ++counts_[i];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s;
  s.bounds = bounds_;
  uint64_t running = 0;
  for (uint64_t c : counts_) s.cumulative.push_back(running += c);
  s.sum = sum_;
  s.count = count_;
  return s;
}

// Time to first token spans queueing and prefill (tens of ms to minutes on a
// large prompt); one output token takes ~5 ms (tiny model) to ~200 ms (0.6B).
ServiceMetrics::ServiceMetrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}),
      tpot_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 1, 2.5}) {}

void ServiceMetrics::count_request(const std::string& api, const std::string& endpoint, const std::string& status) {
  std::lock_guard lock(mu_);
  ++requests_[{api, endpoint, status}];
}

void ServiceMetrics::count_kernel_driven(int tokens) {
  ++kernel_generations_;
  kernel_tokens_ += static_cast<uint64_t>(std::max(tokens, 0));
}

void ServiceMetrics::count_speculative(int drafted, int accepted) {
  draft_tokens_ += static_cast<uint64_t>(std::max(drafted, 0));
  accepted_tokens_ += static_cast<uint64_t>(std::max(accepted, 0));
}

void ServiceMetrics::count_tokens(int prompt_computed, int cached, int completion) {
  prompt_tokens_ += static_cast<uint64_t>(std::max(prompt_computed, 0));
  cached_tokens_ += static_cast<uint64_t>(std::max(cached, 0));
  completion_tokens_ += static_cast<uint64_t>(std::max(completion, 0));
}

void ServiceMetrics::add_section(std::function<std::string()> section) {
  std::lock_guard lock(mu_);
  sections_.push_back(std::move(section));
}

std::string ServiceMetrics::render(const MetricsGauges& g) const {
  std::ostringstream out;
  header(out, "qwen3_bpfd_requests_total", "counter", "Finished requests by API, endpoint and status.");
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, n] : requests_)
      out << "qwen3_bpfd_requests_total{api=\"" << escape_label_value(key[0]) << "\",endpoint=\""
          << escape_label_value(key[1]) << "\",status=\"" << escape_label_value(key[2]) << "\"} " << n << '\n';
  }
  header(out, "qwen3_bpfd_prompt_tokens_total", "counter", "Prompt tokens computed (not taken from a KV cache).");
  sample(out, "qwen3_bpfd_prompt_tokens_total", static_cast<double>(prompt_tokens_.load()));
  header(out, "qwen3_bpfd_cached_tokens_total", "counter", "Prompt tokens reused from a KV cache.");
  sample(out, "qwen3_bpfd_cached_tokens_total", static_cast<double>(cached_tokens_.load()));
  header(out, "qwen3_bpfd_completion_tokens_total", "counter", "Tokens generated.");
  sample(out, "qwen3_bpfd_completion_tokens_total", static_cast<double>(completion_tokens_.load()));
  header(out, "qwen3_bpfd_speculative_draft_tokens_total", "counter",
         "Draft tokens (prompt lookup) verified by speculative decoding.");
  sample(out, "qwen3_bpfd_speculative_draft_tokens_total", static_cast<double>(draft_tokens_.load()));
  header(out, "qwen3_bpfd_speculative_accepted_tokens_total", "counter",
         "Draft tokens the model accepted (each saves a decode step).");
  sample(out, "qwen3_bpfd_speculative_accepted_tokens_total", static_cast<double>(accepted_tokens_.load()));
  header(out, "qwen3_bpfd_kernel_driven_generations_total", "counter",
         "Generations the kernel decoded on its own (driver = kernel; docs/kernel-driver.md).");
  sample(out, "qwen3_bpfd_kernel_driven_generations_total", static_cast<double>(kernel_generations_.load()));
  header(out, "qwen3_bpfd_kernel_driven_tokens_total", "counter", "Tokens the kernel driver chose.");
  sample(out, "qwen3_bpfd_kernel_driven_tokens_total", static_cast<double>(kernel_tokens_.load()));
  histogram(out, "qwen3_bpfd_time_to_first_token_seconds",
            "From a generation's start (queueing included) to its first token.", ttft_.snapshot());
  histogram(out, "qwen3_bpfd_time_per_output_token_seconds", "Time between consecutive generated tokens.",
            tpot_.snapshot());
  header(out, "qwen3_bpfd_model_loaded", "gauge", "1 once the model is loaded and requests are served.");
  sample(out, "qwen3_bpfd_model_loaded", g.loaded ? 1 : 0);
  header(out, "qwen3_bpfd_kv_bytes", "gauge", "KV cache bytes in use (all sessions, ephemeral included).");
  sample(out, "qwen3_bpfd_kv_bytes", static_cast<double>(g.kv_bytes));
  header(out, "qwen3_bpfd_kv_budget_bytes", "gauge", "KV cache budget (kv_budget_mib).");
  sample(out, "qwen3_bpfd_kv_budget_bytes", static_cast<double>(g.kv_budget_bytes));
  header(out, "qwen3_bpfd_sessions", "gauge", "KV sessions by kind.");
  out << "qwen3_bpfd_sessions{kind=\"named\"} " << g.sessions << '\n';
  out << "qwen3_bpfd_sessions{kind=\"ephemeral\"} " << g.ephemeral_sessions << '\n';
  header(out, "qwen3_bpfd_busy_sessions", "gauge", "Sessions a request runs on now.");
  sample(out, "qwen3_bpfd_busy_sessions", g.busy_sessions);
  header(out, "qwen3_bpfd_max_sessions", "gauge", "Named sessions allowed (max_sessions).");
  sample(out, "qwen3_bpfd_max_sessions", g.max_sessions);
  header(out, "qwen3_bpfd_evicted_sessions_total", "counter", "Sessions evicted (TTL or memory pressure).");
  sample(out, "qwen3_bpfd_evicted_sessions_total", static_cast<double>(g.evicted_sessions));
  header(out, "qwen3_bpfd_queue_depth", "gauge", "Forward steps waiting for the engine.");
  sample(out, "qwen3_bpfd_queue_depth", g.queue_depth);
  header(out, "qwen3_bpfd_active_streams", "gauge", "Generations running now.");
  sample(out, "qwen3_bpfd_active_streams", g.active_streams);
  header(out, "qwen3_bpfd_bpf_programs", "gauge", "BPF programs loaded by the engine.");
  sample(out, "qwen3_bpfd_bpf_programs", g.bpf_programs);
  header(out, "qwen3_bpfd_bpf_maps", "gauge", "BPF maps held by the engine (weights, KV, scratch).");
  sample(out, "qwen3_bpfd_bpf_maps", g.bpf_maps);
  header(out, "qwen3_bpfd_http_connections", "gauge", "Open HTTP connections.");
  sample(out, "qwen3_bpfd_http_connections", g.http_connections);
  header(out, "qwen3_bpfd_rejected_connections_total", "counter",
         "Connections refused (peer credentials, connection limit).");
  out << "qwen3_bpfd_rejected_connections_total{api=\"grpc\"} " << g.grpc_rejected_connections << '\n';
  out << "qwen3_bpfd_rejected_connections_total{api=\"http\"} " << g.http_rejected_connections << '\n';
  std::lock_guard lock(mu_);
  for (const auto& section : sections_) out << section();
  return out.str();
}

}  // namespace qwen3
