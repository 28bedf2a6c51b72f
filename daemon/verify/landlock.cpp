#include "verify/landlock.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

// The system's linux/landlock.h predates the network and scope fields, so the
// (stable) kernel ABI is spelled out here.
namespace qwen3::verify {
namespace {

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI >= 4
  uint64_t scoped;              // ABI >= 6
};

struct PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

constexpr uint32_t kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;

constexpr uint64_t kExecute = 1ull << 0;
constexpr uint64_t kWriteFile = 1ull << 1;
constexpr uint64_t kReadFile = 1ull << 2;
constexpr uint64_t kReadDir = 1ull << 3;
constexpr uint64_t kRemoveDir = 1ull << 4;
constexpr uint64_t kRemoveFile = 1ull << 5;
constexpr uint64_t kMakeDir = 1ull << 7;
constexpr uint64_t kMakeReg = 1ull << 8;
constexpr uint64_t kTruncate = 1ull << 14;  // ABI >= 3

constexpr uint64_t kNetBindTcp = 1ull << 0;
constexpr uint64_t kNetConnectTcp = 1ull << 1;
constexpr uint64_t kScopeAbstractUnix = 1ull << 0;
constexpr uint64_t kScopeSignal = 1ull << 1;

uint64_t handled_fs_for(int abi) {
  if (abi >= 5) return (1ull << 16) - 1;  // + IOCTL_DEV
  if (abi >= 3) return (1ull << 15) - 1;  // + TRUNCATE
  if (abi >= 2) return (1ull << 14) - 1;  // + REFER
  return (1ull << 13) - 1;
}

}  // namespace

int landlock_abi() {
  long v = syscall(__NR_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return v < 0 ? -1 : static_cast<int>(v);
}

int landlock_confine(const LandlockRule* rules, size_t count) {
  const int abi = landlock_abi();
  if (abi < 1) return errno ? errno : EOPNOTSUPP;
  const uint64_t handled = handled_fs_for(abi);
  RulesetAttr attr = {handled, 0, 0};
  size_t size = sizeof(uint64_t);
  if (abi >= 4) {
    attr.handled_access_net = kNetBindTcp | kNetConnectTcp;  // no rules: all TCP denied
    size = 2 * sizeof(uint64_t);
  }
  if (abi >= 6) {
    attr.scoped = kScopeAbstractUnix | kScopeSignal;
    size = sizeof attr;
  }
  int ruleset = static_cast<int>(syscall(__NR_landlock_create_ruleset, &attr, size, 0));
  if (ruleset < 0) return errno;
  for (size_t i = 0; i < count; ++i) {
    uint64_t allowed = kReadFile | kReadDir;
    if (rules[i].access == LandlockAccess::read_execute) allowed |= kExecute;
    if (rules[i].access == LandlockAccess::read_write)
      allowed |= kWriteFile | kRemoveDir | kRemoveFile | kMakeDir | kMakeReg | (abi >= 3 ? kTruncate : 0);
    allowed &= handled;
    int fd = open(rules[i].path, O_PATH | O_CLOEXEC | O_DIRECTORY);
    if (fd < 0) {
      int e = errno;
      close(ruleset);
      return e;
    }
    PathBeneathAttr pb = {allowed, fd};
    long rc = syscall(__NR_landlock_add_rule, ruleset, kRulePathBeneath, &pb, 0);
    int e = errno;
    close(fd);
    if (rc != 0) {
      close(ruleset);
      return e;
    }
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(__NR_landlock_restrict_self, ruleset, 0) != 0) {
    int e = errno;
    close(ruleset);
    return e;
  }
  close(ruleset);
  return 0;
}

}  // namespace qwen3::verify
