// The Prometheus text of kernel clients: the XDP program's counters (summed
// over CPUs), the broker's and the kernel path's, appended to the daemon's
// /metrics through the service's exposition writer (service/metrics.h).
#include <sstream>
#include <string>

#include "kclient/broker.h"
#include "service/metrics.h"

namespace qwen3::kclient {

std::string Broker::metrics_text() const {
  const BpfCounters b = endpoint_ ? endpoint_->counters() : BpfCounters{};
  std::ostringstream out;
  auto line = [&out](const char* name, const char* label, uint64_t v) {
    metric_sample(out, std::string(name) + "{outcome=\"" + label + "\"}", double(v));
  };
  metric_header(out, "qwen3_bpfd_kclient_datagrams_total", "counter",
                "Kernel-client datagrams by what the XDP program did with them.");
  line("qwen3_bpfd_kclient_datagrams_total", "malformed", b.malformed);
  line("qwen3_bpfd_kclient_datagrams_total", "rate_limited", b.rate_limited);
  line("qwen3_bpfd_kclient_datagrams_total", "shed", b.shed);
  line("qwen3_bpfd_kclient_datagrams_total", "submitted", b.submitted);
  line("qwen3_bpfd_kclient_datagrams_total", "poll_answered", b.polls);
  line("qwen3_bpfd_kclient_datagrams_total", "cancel", b.cancels);
  metric_header(out, "qwen3_bpfd_kclient_requests_total", "counter",
                "Kernel-client generate requests by outcome in the daemon.");
  line("qwen3_bpfd_kclient_requests_total", "served", counters_.served);
  line("qwen3_bpfd_kclient_requests_total", "cancelled", counters_.cancelled);
  line("qwen3_bpfd_kclient_requests_total", "failed", counters_.failed);
  line("qwen3_bpfd_kclient_requests_total", "busy", counters_.busy);
  line("qwen3_bpfd_kclient_requests_total", "no_slot", counters_.no_slot);
  line("qwen3_bpfd_kclient_requests_total", "invalid", counters_.invalid);
  metric_header(out, "qwen3_bpfd_kclient_tokens_total", "counter", "Tokens generated for kernel clients.");
  metric_sample(out, "qwen3_bpfd_kclient_tokens_total", double(counters_.tokens.load()));
  metric_header(out, "qwen3_bpfd_kclient_endpoint_attached", "gauge", "1 when the XDP endpoint is attached.");
  metric_sample(out, "qwen3_bpfd_kclient_endpoint_attached", endpoint_ && endpoint_->attached() ? 1 : 0);
  std::string text = out.str();
  if (kernel_path_) text += kernel_path_->metrics_text();
  return text;
}

}  // namespace qwen3::kclient
