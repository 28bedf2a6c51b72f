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
  s << "v2 " << u.release << " " << u.version << " btf-size=" << st.st_size << "\n";
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
