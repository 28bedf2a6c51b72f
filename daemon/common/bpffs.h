// Pin directories live on a bpffs. systemd mounts one at /sys/fs/bpf on
// boot; containers and minimal VMs often leave it unmounted, so, like
// bpftool, the daemon mounts it there when a pin directory needs it.
#pragma once

#include <string>

namespace qwen3 {

// The conventional bpffs mount point.
inline constexpr const char* kBpffsRoot = "/sys/fs/bpf";

// Makes sure the parent of pin_dir is a bpffs. When that parent is
// /sys/fs/bpf and no bpffs is mounted there, mounts one (mode 0700) and
// returns true. A parent elsewhere is left to the administrator. Throws
// qwen3::Error, naming the directory, when /sys/fs/bpf cannot be mounted.
bool ensure_bpffs_for(const std::string& pin_dir);

}  // namespace qwen3
