#include "common/bpffs.h"

#include <bpf/bpf.h>
#include <linux/magic.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace qwen3 {
namespace {

bool is_bpffs(const std::string& dir) {
  struct statfs fs{};
  return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == BPF_FS_MAGIC;
}

std::string parent_of(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : dir.substr(0, slash);
}

}  // namespace

bool ensure_bpffs_for(const std::string& pin_dir) {
  const std::string parent = parent_of(pin_dir);
  if (parent != kBpffsRoot || is_bpffs(parent)) return false;
  if (::mount("bpf", kBpffsRoot, "bpf", 0, "mode=0700") != 0)
    throw Error(std::string("no bpffs is mounted at ") + kBpffsRoot + " for " + pin_dir + ", and mounting one failed: " +
                std::strerror(errno) + " (mount it, e.g. `mount -t bpf bpf " + kBpffsRoot + "`)");
  return true;
}

void pin_maps(const std::string& dir, const std::vector<MapPin>& maps, const std::string& who) {
  if (ensure_bpffs_for(dir)) spdlog::info("{}: mounted a bpffs at {}", who, kBpffsRoot);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw Error(who + ": cannot create the pin directory " + dir + ": " + std::strerror(errno) +
                " (it must be on a bpffs, e.g. " + kBpffsRoot + "/qwen3-bpfd)");
  std::vector<std::string> pinned;
  for (const MapPin& m : maps) {
    const std::string path = dir + "/" + m.name;
    if (::unlink(path.c_str()) == 0) spdlog::warn("{}: replaced the stale pin {}", who, path);
    if (bpf_obj_pin(m.fd, path.c_str()) != 0) {
      const int err = errno;
      unpin_maps(dir, pinned);
      throw Error(who + ": cannot pin " + path + ": " + std::strerror(err) + " (the directory must be on a bpffs)");
    }
    ::chmod(path.c_str(), 0600);
    pinned.push_back(m.name);
  }
}

void unpin_maps(const std::string& dir, const std::vector<std::string>& names) {
  for (const std::string& name : names) ::unlink((dir + "/" + name).c_str());
  ::rmdir(dir.c_str());  // only when empty
}

}  // namespace qwen3
