// Pin directories live on a bpffs. systemd mounts one at /sys/fs/bpf on
// boot; containers and minimal VMs often leave it unmounted, so, like
// bpftool, the daemon mounts it there when a pin directory needs it.
#pragma once

#include <string>
#include <vector>

namespace qwen3 {

// The conventional bpffs mount point.
inline constexpr const char* kBpffsRoot = "/sys/fs/bpf";

// Makes sure the parent of pin_dir is a bpffs. When that parent is
// /sys/fs/bpf and no bpffs is mounted there, mounts one (mode 0700) and
// returns true. A parent elsewhere is left to the administrator. Throws
// qwen3::Error, naming the directory, when /sys/fs/bpf cannot be mounted.
bool ensure_bpffs_for(const std::string& pin_dir);

struct MapPin {
  std::string name;  // the pin's file name in the directory
  int fd;            // the map
};

// Pins each map as dir/name, mode 0600 (root only), in dir (made mode 0700;
// on a bpffs: ensure_bpffs_for). A stale pin a crashed daemon left is
// replaced. All or nothing: on a failure the pins made so far are removed
// and the Error, prefixed by who ("kernel clients"), names the path.
void pin_maps(const std::string& dir, const std::vector<MapPin>& maps, const std::string& who);

// Removes dir/name for each name, then dir itself if nothing else is left
// in it (a client's own pinned link keeps it).
void unpin_maps(const std::string& dir, const std::vector<std::string>& names);

}  // namespace qwen3
