#include "common/bpffs.h"

#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/vfs.h>
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

}  // namespace qwen3
