// The Prometheus text of kernel clients: the XDP program's counters (summed
// over CPUs) and the broker's, appended to the daemon's /metrics.
#include <string>

#include "kclient/broker.h"

namespace qwen3::kclient {

std::string Broker::metrics_text() const {
  const BpfCounters b = endpoint_ ? endpoint_->counters() : BpfCounters{};
  std::string out;
  auto line = [&out](const char* name, const char* label, uint64_t v) {
    out += std::string(name) + "{outcome=\"" + label + "\"} " + std::to_string(v) + "\n";
  };
  out += "# HELP qwen3_bpfd_kclient_datagrams_total Kernel-client datagrams by what the XDP program did with them.\n";
  out += "# TYPE qwen3_bpfd_kclient_datagrams_total counter\n";
  line("qwen3_bpfd_kclient_datagrams_total", "malformed", b.malformed);
  line("qwen3_bpfd_kclient_datagrams_total", "rate_limited", b.rate_limited);
  line("qwen3_bpfd_kclient_datagrams_total", "shed", b.shed);
  line("qwen3_bpfd_kclient_datagrams_total", "submitted", b.submitted);
  line("qwen3_bpfd_kclient_datagrams_total", "poll_answered", b.polls);
  line("qwen3_bpfd_kclient_datagrams_total", "cancel", b.cancels);
  out += "# HELP qwen3_bpfd_kclient_requests_total Kernel-client generate requests by outcome in the daemon.\n";
  out += "# TYPE qwen3_bpfd_kclient_requests_total counter\n";
  line("qwen3_bpfd_kclient_requests_total", "served", counters_.served);
  line("qwen3_bpfd_kclient_requests_total", "cancelled", counters_.cancelled);
  line("qwen3_bpfd_kclient_requests_total", "failed", counters_.failed);
  line("qwen3_bpfd_kclient_requests_total", "busy", counters_.busy);
  line("qwen3_bpfd_kclient_requests_total", "no_slot", counters_.no_slot);
  line("qwen3_bpfd_kclient_requests_total", "invalid", counters_.invalid);
  out += "# HELP qwen3_bpfd_kclient_tokens_total Tokens generated for kernel clients.\n";
  out += "# TYPE qwen3_bpfd_kclient_tokens_total counter\n";
  out += "qwen3_bpfd_kclient_tokens_total " + std::to_string(counters_.tokens.load()) + "\n";
  out += "# HELP qwen3_bpfd_kclient_endpoint_attached 1 when the XDP endpoint is attached.\n";
  out += "# TYPE qwen3_bpfd_kclient_endpoint_attached gauge\n";
  out += std::string("qwen3_bpfd_kclient_endpoint_attached ") + (endpoint_ && endpoint_->attached() ? "1" : "0") + "\n";
  return out;
}

}  // namespace qwen3::kclient
