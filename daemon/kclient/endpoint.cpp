#include "kclient/endpoint.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/bpffs.h"
#include "common/error.h"
#include "kclient_abi.h"
#include "kclient_xdp.skel.h"

namespace qwen3::kclient {

namespace {

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

bpf_map* map_named(kclient_xdp* s, const std::string& name) {
  if (name == "qk_submit") return s->maps.qk_submit;
  if (name == "qk_results") return s->maps.qk_results;
  if (name == "qk_sessions") return s->maps.qk_sessions;
  return s->maps.qk_counters;
}

}  // namespace

KernelEndpoint::KernelEndpoint(const EndpointOptions& options) : options_(options) {
  skel_ = kclient_xdp__open();
  if (!skel_) throw Error("kernel clients: cannot open the BPF object kclient_xdp: " + errno_text(errno));
  skel_->rodata->QK_PORT = static_cast<__u16>(options.port);
  skel_->rodata->QK_RATE_PER_SEC = options.rate_per_sec;
  // Without an endpoint only the maps are wanted (pinned for BPF clients): the XDP program is not even loaded.
  if (options.iface.empty()) bpf_program__set_autoload(skel_->progs.qk_endpoint, false);
  if (int err = kclient_xdp__load(skel_)) {
    kclient_xdp__destroy(skel_);
    skel_ = nullptr;
    throw Error("kernel clients: loading kclient_xdp failed (" + errno_text(err) +
                "); the daemon needs CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON");
  }
  try {
    const int fd = bpf_map__fd(skel_->maps.qk_results);
    slots_bytes_ = sizeof(qk_result_slot) * QK_SLOTS;
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    slots_bytes_ = (slots_bytes_ + page - 1) / page * page;
    void* p = mmap(nullptr, slots_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) throw Error("kernel clients: cannot mmap the result slots: " + errno_text(errno));
    slots_ = static_cast<qk_result_slot*>(p);
    if (!options.pin_dir.empty()) pin_maps();
    if (!options.iface.empty()) {
      const unsigned ifindex = if_nametoindex(options.iface.c_str());
      if (ifindex == 0)
        throw Error("kernel clients: udp_endpoint names interface '" + options.iface +
                    "', which does not exist (ip link shows the interfaces)");
      LIBBPF_OPTS(bpf_link_create_opts, lopts, .flags = 0);
      link_fd_ = bpf_link_create(bpf_program__fd(skel_->progs.qk_endpoint), static_cast<int>(ifindex), BPF_XDP, &lopts);
      if (link_fd_ < 0)
        throw Error("kernel clients: attaching the XDP program to " + options.iface + " failed (" +
                    errno_text(link_fd_) + "); is another XDP program attached (ip link show " + options.iface + ")?");
      spdlog::info("kernel clients: XDP endpoint on {} UDP port {} (rate limit {}/s per source)", options.iface,
                   options.port, options.rate_per_sec);
    }
  } catch (...) {
    release();
    throw;
  }
}

KernelEndpoint::~KernelEndpoint() { release(); }

void KernelEndpoint::release() {
  if (link_fd_ >= 0) ::close(link_fd_);  // detaches the XDP program
  link_fd_ = -1;
  if (pinned_) unpin_maps();
  if (slots_) munmap(slots_, slots_bytes_);
  slots_ = nullptr;
  if (skel_) kclient_xdp__destroy(skel_);
  skel_ = nullptr;
}

void KernelEndpoint::pin_maps() {
  std::vector<MapPin> maps;
  for (const char* name : kPinnedMaps) maps.push_back({name, bpf_map__fd(map_named(skel_, name))});
  qwen3::pin_maps(options_.pin_dir, maps, "kernel clients (kernel_client_pin_dir)");
  pinned_ = true;
  spdlog::info("kernel clients: maps pinned in {} (mode 0600, root)", options_.pin_dir);
}

void KernelEndpoint::unpin_maps() {
  qwen3::unpin_maps(options_.pin_dir, {std::begin(kPinnedMaps), std::end(kPinnedMaps)});
  pinned_ = false;
}

int KernelEndpoint::submit_ring_fd() const { return bpf_map__fd(skel_->maps.qk_submit); }
int KernelEndpoint::sessions_map_fd() const { return bpf_map__fd(skel_->maps.qk_sessions); }

BpfCounters KernelEndpoint::counters() const {
  const int cpus = libbpf_num_possible_cpus();
  std::vector<uint64_t> values(cpus > 0 ? cpus : 1);
  uint64_t sums[QK_C_COUNT] = {};
  for (uint32_t k = 0; k < QK_C_COUNT; ++k) {
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.qk_counters), &k, values.data()) != 0) continue;
    for (uint64_t v : values) sums[k] += v;
  }
  return {sums[QK_C_MALFORMED], sums[QK_C_RATE_LIMITED], sums[QK_C_SHED],
          sums[QK_C_SUBMITTED], sums[QK_C_POLLS],        sums[QK_C_CANCELS]};
}

}  // namespace qwen3::kclient
