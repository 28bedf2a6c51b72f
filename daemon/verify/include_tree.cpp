#include "verify/include_tree.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "common/error.h"

extern char** environ;

namespace qwen3::verify {
namespace fs = std::filesystem;
namespace {

std::mutex tree_mutex;

std::string read_small_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Identity of what the tree was made from: kernel release and BTF blob size/mtime.
std::string stamp_for(const IncludeTreeSources& src) {
  struct utsname u {};
  uname(&u);
  struct stat st {};
  if (stat(src.kernel_btf.c_str(), &st) != 0)
    throw Error("cannot stat kernel BTF " + src.kernel_btf + ": " + std::strerror(errno) +
                    " (vmlinux.h is generated from it; is CONFIG_DEBUG_INFO_BTF enabled?)",
                ErrorKind::unavailable);
  std::ostringstream s;
  s << "v3 " << u.release << " " << u.version << " btf-size=" << st.st_size << "\n";
  return s.str();
}

// Where a header symlink may lead: newer linux-libc-dev packages ship asm/*.h
// as links into /usr/lib/linux/uapi.
bool inside_system_headers(const fs::path& p) {
  for (const char* root : {"/usr/include/", "/usr/lib/linux/"})
    if (p.string().rfind(root, 0) == 0) return true;
  return false;
}

// Copies regular files as plain files so the tree cannot point anywhere else.
// A symlink is copied as the file it resolves to, only when that file is a
// regular file inside the system header directories; other links are skipped.
void copy_headers(const fs::path& from, const fs::path& to, bool only_h) {
  if (!fs::is_directory(from)) throw Error("header directory " + from.string() + " is missing", ErrorKind::unavailable);
  fs::create_directories(to);
  for (auto it = fs::recursive_directory_iterator(from); it != fs::recursive_directory_iterator(); ++it) {
    const auto status = it->symlink_status();
    fs::path rel = fs::relative(it->path(), from);
    if (fs::is_directory(status)) {
      fs::create_directories(to / rel);
      fs::permissions(to / rel, fs::perms(0755));
    } else if (fs::is_regular_file(status) || fs::is_symlink(status)) {
      if (only_h && it->path().extension() != ".h") continue;
      fs::path source = it->path();
      if (fs::is_symlink(status)) {
        std::error_code ec;
        source = fs::canonical(it->path(), ec);
        if (ec || !fs::is_regular_file(source) || !inside_system_headers(source)) continue;
      }
      fs::copy_file(source, to / rel, fs::copy_options::overwrite_existing);
      fs::permissions(to / rel, fs::perms(0644));
    }
  }
  fs::permissions(to, fs::perms(0755));
}

fs::path arch_asm_dir(const fs::path& usr_include) {
  if (fs::is_directory(usr_include / "asm") && !fs::is_symlink(usr_include / "asm")) return usr_include / "asm";
  struct utsname u {};
  uname(&u);
  fs::path multiarch = usr_include / (std::string(u.machine) + "-linux-gnu") / "asm";
  if (fs::is_directory(multiarch)) return multiarch;
  throw Error("cannot find the kernel uapi asm/ headers under " + usr_include.string() +
                  " (install linux-libc-dev)",
              ErrorKind::unavailable);
}

void dump_vmlinux_h(const IncludeTreeSources& src, const fs::path& out) {
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create " + out.string() + ": " + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::string a0 = src.bpftool, a1 = "btf", a2 = "dump", a3 = "file", a4 = src.kernel_btf, a5 = "format", a6 = "c";
  char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(), a4.data(), a5.data(), a6.data(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, src.bpftool.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fd);
  if (rc != 0) throw Error("cannot run " + src.bpftool + " to generate vmlinux.h: " + std::strerror(rc), ErrorKind::unavailable);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || fs::file_size(out) < 1024)
    throw Error("'" + src.bpftool + " btf dump file " + src.kernel_btf + " format c' failed; cannot make vmlinux.h",
                ErrorKind::unavailable);
}

// A minimal, freestanding set of libc headers, written by us (no glibc
// internals): what uapi headers pull in (linux/if.h -> sys/socket.h,
// ethtool.h -> limits.h, ...) and the fixed-width types BPF programs use.
// Declarations only: a BPF program cannot call libc.
// The texts of the minimal libc headers, one constant each, and their table.
constexpr const char* kStddefH = R"(#ifndef _QWEN3_STDDEF_H
#define _QWEN3_STDDEF_H
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef __WCHAR_TYPE__ wchar_t;
#ifndef NULL
#define NULL ((void *)0)
#endif
#define offsetof(type, member) __builtin_offsetof(type, member)
#endif
)";

constexpr const char* kStdintH = R"(#ifndef _QWEN3_STDINT_H
#define _QWEN3_STDINT_H
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __INTPTR_TYPE__ intptr_t;
typedef __UINTPTR_TYPE__ uintptr_t;
typedef __INTMAX_TYPE__ intmax_t;
typedef __UINTMAX_TYPE__ uintmax_t;
#define INT8_MAX __INT8_MAX__
#define INT16_MAX __INT16_MAX__
#define INT32_MAX __INT32_MAX__
#define INT64_MAX __INT64_MAX__
#define INT8_MIN (-INT8_MAX - 1)
#define INT16_MIN (-INT16_MAX - 1)
#define INT32_MIN (-INT32_MAX - 1)
#define INT64_MIN (-INT64_MAX - 1)
#define UINT8_MAX __UINT8_MAX__
#define UINT16_MAX __UINT16_MAX__
#define UINT32_MAX __UINT32_MAX__
#define UINT64_MAX __UINT64_MAX__
#define SIZE_MAX __SIZE_MAX__
#endif
)";

constexpr const char* kStdboolH = R"(#ifndef _QWEN3_STDBOOL_H
#define _QWEN3_STDBOOL_H
#define bool _Bool
#define true 1
#define false 0
#define __bool_true_false_are_defined 1
#endif
)";

constexpr const char* kLimitsH = R"(#ifndef _QWEN3_LIMITS_H
#define _QWEN3_LIMITS_H
#define CHAR_BIT __CHAR_BIT__
#define SCHAR_MAX __SCHAR_MAX__
#define SCHAR_MIN (-SCHAR_MAX - 1)
#define UCHAR_MAX (SCHAR_MAX * 2 + 1)
#define SHRT_MAX __SHRT_MAX__
#define SHRT_MIN (-SHRT_MAX - 1)
#define USHRT_MAX (SHRT_MAX * 2 + 1)
#define INT_MAX __INT_MAX__
#define INT_MIN (-INT_MAX - 1)
#define UINT_MAX (INT_MAX * 2U + 1U)
#define LONG_MAX __LONG_MAX__
#define LONG_MIN (-LONG_MAX - 1L)
#define ULONG_MAX (LONG_MAX * 2UL + 1UL)
#define LLONG_MAX __LONG_LONG_MAX__
#define LLONG_MIN (-LLONG_MAX - 1LL)
#define ULLONG_MAX (LLONG_MAX * 2ULL + 1ULL)
#endif
)";

constexpr const char* kEndianH = R"(#ifndef _QWEN3_ENDIAN_H
#define _QWEN3_ENDIAN_H
#define __LITTLE_ENDIAN __ORDER_LITTLE_ENDIAN__
#define __BIG_ENDIAN __ORDER_BIG_ENDIAN__
#define __BYTE_ORDER __BYTE_ORDER__
#define LITTLE_ENDIAN __LITTLE_ENDIAN
#define BIG_ENDIAN __BIG_ENDIAN
#define BYTE_ORDER __BYTE_ORDER
#endif
)";

constexpr const char* kSysTypesH = R"(#ifndef _QWEN3_SYS_TYPES_H
#define _QWEN3_SYS_TYPES_H
#include <stddef.h>
#include <stdint.h>
typedef __INT64_TYPE__ ssize_t;
typedef __INT64_TYPE__ off_t;
typedef int pid_t;
typedef unsigned int uid_t;
typedef unsigned int gid_t;
typedef unsigned int mode_t;
typedef __INT64_TYPE__ time_t;
typedef __INT64_TYPE__ suseconds_t;
typedef unsigned char u_char;
typedef unsigned short u_short;
typedef unsigned int u_int;
typedef unsigned long u_long;
#endif
)";

constexpr const char* kSysTimeH = R"(#ifndef _QWEN3_SYS_TIME_H
#define _QWEN3_SYS_TIME_H
#include <sys/types.h>
struct timeval { time_t tv_sec; suseconds_t tv_usec; };
#endif
)";

constexpr const char* kSysIoctlH = R"(#ifndef _QWEN3_SYS_IOCTL_H
#define _QWEN3_SYS_IOCTL_H
#include <asm/ioctl.h>
#endif
)";

constexpr const char* kSysSocketH = R"(#ifndef _QWEN3_SYS_SOCKET_H
#define _QWEN3_SYS_SOCKET_H
#include <sys/types.h>
typedef unsigned short sa_family_t;
typedef unsigned int socklen_t;
struct sockaddr { sa_family_t sa_family; char sa_data[14]; };
#define AF_UNSPEC 0
#define AF_UNIX 1
#define AF_LOCAL AF_UNIX
#define AF_INET 2
#define AF_INET6 10
#define AF_NETLINK 16
#define AF_PACKET 17
#define AF_XDP 44
#define PF_UNSPEC AF_UNSPEC
#define PF_UNIX AF_UNIX
#define PF_INET AF_INET
#define PF_INET6 AF_INET6
#define PF_PACKET AF_PACKET
#define SOCK_STREAM 1
#define SOCK_DGRAM 2
#define SOCK_RAW 3
#endif
)";

const std::vector<std::pair<const char*, const char*>>& libc_headers() {
  static const std::vector<std::pair<const char*, const char*>> files = {
      {"stddef.h", kStddefH},
      {"stdint.h", kStdintH},
      {"stdbool.h", kStdboolH},
      {"limits.h", kLimitsH},
      {"endian.h", kEndianH},
      {"sys/types.h", kSysTypesH},
      {"sys/time.h", kSysTimeH},
      {"sys/ioctl.h", kSysIoctlH},
      {"sys/socket.h", kSysSocketH},
  };
  return files;
}

void write_libc_headers(const fs::path& root) {
  for (const auto& [name, text] : libc_headers()) {
    fs::path p = root / name;
    fs::create_directories(p.parent_path());
    fs::permissions(p.parent_path(), fs::perms(0755));
    std::ofstream(p, std::ios::binary) << text;
    fs::permissions(p, fs::perms(0644));
  }
}

}  // namespace

// Cross-process exclusion (several daemons or test processes may share data_dir).
class DirLock {
 public:
  explicit DirLock(const fs::path& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0)
      while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_ = -1;
};

std::string prepare_include_tree(const std::string& data_dir, const IncludeTreeSources& src) {
  std::lock_guard lock(tree_mutex);
  const fs::path root = fs::path(data_dir) / "include";
  const std::string stamp = stamp_for(src);
  if (fs::exists(root / ".stamp") && read_small_file(root / ".stamp") == stamp) return root.string();

  try {
    fs::create_directories(data_dir);
    DirLock dir_lock(fs::path(data_dir) / "include.lock");
    // Another process may have finished it while we waited for the lock.
    if (fs::exists(root / ".stamp") && read_small_file(root / ".stamp") == stamp) return root.string();
    const fs::path tmp = fs::path(data_dir) / ("include.tmp." + std::to_string(getpid()));
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    const fs::path inc(src.usr_include);
    copy_headers(inc / "bpf", tmp / "bpf", true);
    copy_headers(inc / "linux", tmp / "linux", false);
    copy_headers(inc / "asm-generic", tmp / "asm-generic", false);
    copy_headers(arch_asm_dir(inc), tmp / "asm", false);
    dump_vmlinux_h(src, tmp / "vmlinux.h");
    write_libc_headers(tmp);
    fs::permissions(tmp, fs::perms(0755));
    {
      std::ofstream(tmp / ".stamp") << stamp;
    }
    fs::remove_all(root);
    fs::rename(tmp, root);
  } catch (const fs::filesystem_error& e) {
    throw Error(std::string("cannot prepare the compiler's include tree in ") + data_dir + ": " + e.what());
  }
  return root.string();
}

}  // namespace qwen3::verify
