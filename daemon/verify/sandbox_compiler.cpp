#include "verify/sandbox_compiler.h"

#include <linux/capability.h>
#include <sys/syscall.h>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>

#include "verify/child_io.h"
#include "verify/landlock.h"

namespace qwen3::verify {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// Exit codes the sandbox child uses when it cannot even start the compiler.
constexpr int kSetupFailed = 120;
constexpr int kExecFailed = 121;
constexpr int kDepsFd = 3;                 // in the sandbox child: where the dependency list goes
constexpr size_t kMaxDepsBytes = 1 << 20;  // a longer list stops the compile

std::string resolve_executable(const std::string& name) {
  auto real = [](const std::string& p) -> std::string {
    char buf[PATH_MAX];
    if (access(p.c_str(), X_OK) == 0 && realpath(p.c_str(), buf)) return buf;
    return "";
  };
  if (name.find('/') != std::string::npos) return real(name);
  const char* env = getenv("PATH");
  std::string path = env ? env : "/usr/local/bin:/usr/bin:/bin";
  path += ":/usr/local/sbin:/usr/sbin:/sbin";
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    std::string r = real(dir + "/" + name);
    if (!r.empty()) return r;
  }
  return "";
}

void get_nobody(uid_t& uid, gid_t& gid) {
  uid = 65534;
  gid = 65534;
  struct passwd pw {};
  struct passwd* res = nullptr;
  char buf[4096];
  if (getpwnam_r("nobody", &pw, buf, sizeof buf, &res) == 0 && res) {
    uid = pw.pw_uid;
    gid = pw.pw_gid;
  }
}

// Everything the child needs, computed before fork: the child only makes syscalls.
struct SandboxPlan {
  SandboxMode mode = SandboxMode::namespaces;
  std::vector<std::string> landlock_paths;
  std::vector<LandlockRule> landlock_rules;  // point into landlock_paths
  bool landlock_required = false;
  size_t executable_dirs = 0;
  std::string cwd;                        // landlock mode: the request dir
  std::string root;                       // tmpfs mount point on the host
  std::vector<std::string> mkdirs;        // absolute paths under root, parents first
  std::vector<std::pair<std::string, std::string>> binds;     // host dir -> path under root
  std::vector<std::pair<std::string, std::string>> symlinks;  // target -> path under root
  std::string tmp_dir;                    // root/tmp, world-writable scratch
  std::string source_file;                // root/src/prog.c, written from stdin
  std::string exe;                        // path of clang inside the sandbox
  std::vector<std::string> args;
  std::vector<std::string> env;
};

void add_dir_chain(SandboxPlan& plan, const std::string& rel) {
  fs::path acc;
  for (const auto& part : fs::path(rel).relative_path()) {
    acc /= part;
    std::string full = plan.root + "/" + acc.string();
    if (std::find(plan.mkdirs.begin(), plan.mkdirs.end(), full) == plan.mkdirs.end()) plan.mkdirs.push_back(full);
  }
}

void add_bind(SandboxPlan& plan, const std::string& host_dir) {
  add_dir_chain(plan, host_dir);
  plan.binds.push_back({host_dir, plan.root + host_dir});
}

std::string build_plan(SandboxPlan& plan, const SandboxConfig& cfg, const std::string& clang_real) {
  // clang lives in <prefix>/bin/clang; its private libraries in <prefix>/lib.
  fs::path prefix = fs::path(clang_real).parent_path().parent_path();
  if (prefix.empty() || prefix == "/") return "compiler " + clang_real + " is not under a <prefix>/bin directory";
  add_bind(plan, prefix.string());
  struct utsname u {};
  uname(&u);
  const std::string multiarch = std::string(u.machine) + "-linux-gnu";
  for (const std::string& d : {"/usr/lib/" + multiarch, std::string("/usr/lib64"), "/lib/" + multiarch,
                               std::string("/lib64")}) {
    struct stat st {};
    if (lstat(d.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      // With merged /usr, /lib is a symlink and /lib/<arch> resolves into /usr/lib/<arch>.
      char buf[PATH_MAX];
      if (realpath(d.c_str(), buf) && std::string(buf) != d) continue;
      if (prefix.string().rfind(d, 0) == 0) continue;
      add_bind(plan, d);
    }
  }
  for (const char* top : {"/lib", "/lib64", "/bin"}) {
    char buf[PATH_MAX];
    ssize_t n = readlink(top, buf, sizeof buf - 1);
    if (n > 0) {
      buf[n] = 0;
      plan.symlinks.push_back({buf, plan.root + top});
    }
  }
  add_dir_chain(plan, "/inc");
  plan.binds.push_back({cfg.include_dir, plan.root + "/inc"});
  add_dir_chain(plan, "/tmp");
  plan.tmp_dir = plan.root + "/tmp";
  add_dir_chain(plan, "/src");
  plan.source_file = plan.root + "/src/prog.c";
  plan.exe = clang_real;
  plan.args = {clang_real,
               "--no-default-config",
               "-O2",
               "-g",
               "-target",
               "bpf",
               "-Wall",
               "-c",
               "-nostdinc",
               "-isystem",
               "/inc",
               "-fno-color-diagnostics",
               "-fno-crash-diagnostics",
               "-fno-trigraphs",
               "-ferror-limit=20",
               "-fmacro-backtrace-limit=4",
               // What clang read (every #include, #embed), for the parent to check.
               "-MD",
               "-MF",
               "/tmp/prog.d",
               "-x",
               "c",
               "/src/prog.c",
               "-o",
               "-"};
  plan.env = {"PATH=/usr/bin:/bin", "LC_ALL=C", "TMPDIR=/tmp", "HOME=/tmp"};
  // Landlock on top, in the chroot's view (best effort in this mode).
  for (const auto& [src, dst] : plan.binds) plan.landlock_paths.push_back(dst.substr(plan.root.size()));
  plan.executable_dirs = plan.landlock_paths.size() - 1;  // all binds but /inc
  plan.landlock_paths.push_back("/src");
  plan.landlock_paths.push_back("/tmp");
  return "";
}

// Landlock-only plan: host paths, the request dir holds prog.c and scratch space.
std::string build_landlock_plan(SandboxPlan& plan, const SandboxConfig& cfg, const std::string& clang_real,
                                const std::string& request_dir) {
  plan.mode = SandboxMode::landlock;
  plan.landlock_required = true;
  plan.cwd = request_dir;
  fs::path prefix = fs::path(clang_real).parent_path().parent_path();
  if (prefix.empty() || prefix == "/") return "compiler " + clang_real + " is not under a <prefix>/bin directory";
  struct utsname u {};
  uname(&u);
  const std::string multiarch = std::string(u.machine) + "-linux-gnu";
  plan.landlock_paths = {prefix.string()};
  for (const std::string& d : {"/usr/lib/" + multiarch, std::string("/usr/lib64"), "/lib/" + multiarch,
                               std::string("/lib64")}) {
    char buf[PATH_MAX];
    if (realpath(d.c_str(), buf) && fs::is_directory(buf)) plan.landlock_paths.push_back(buf);
  }
  plan.executable_dirs = plan.landlock_paths.size();
  plan.landlock_paths.push_back(cfg.include_dir);
  plan.landlock_paths.push_back(request_dir);
  plan.exe = clang_real;
  plan.args = {clang_real, "--no-default-config", "-O2", "-g", "-target", "bpf", "-Wall", "-c", "-nostdinc",
               "-isystem", cfg.include_dir, "-fno-color-diagnostics", "-fno-crash-diagnostics", "-fno-trigraphs",
               "-ferror-limit=20", "-fmacro-backtrace-limit=4", "-MD", "-MF", request_dir + "/tmp/prog.d", "-x", "c",
               request_dir + "/prog.c", "-o", "-"};
  plan.env = {"PATH=/usr/bin:/bin", "LC_ALL=C", "TMPDIR=" + request_dir + "/tmp", "HOME=" + request_dir};
  return "";
}

// Paths are ordered: compiler prefix and library dirs (read+execute), then
// the include tree and source (read), then the scratch dir (read+write).
void finish_landlock_rules(SandboxPlan& plan, size_t executable_dirs) {
  plan.landlock_rules.clear();
  const size_t n = plan.landlock_paths.size();
  for (size_t i = 0; i < n; ++i) {
    LandlockAccess a = i < executable_dirs ? LandlockAccess::read_execute
                       : i + 1 == n        ? LandlockAccess::read_write
                                           : LandlockAccess::read;
    plan.landlock_rules.push_back({plan.landlock_paths[i].c_str(), a});
  }
}

bool drop_all_capabilities() {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {};
  return syscall(SYS_capset, &header, data) == 0;
}

[[noreturn]] void child_fail(int code, const char* what) {
  const char* err = strerror(errno);
  auto put = [](const char* s) { (void)!write(STDERR_FILENO, s, strlen(s)); };
  put("sandbox: ");
  put(what);
  put(": ");
  put(err);
  put("\n");
  _exit(code);
}

// Namespace mode, in the child: private mounts, network, IPC and UTS; a
// tmpfs root with the plan's directories, links and read-only binds; the
// source from stdin as a file there; then chroot into it.
void enter_private_root(const SandboxPlan& plan) {
  if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) != 0) child_fail(kSetupFailed, "unshare");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) child_fail(kSetupFailed, "make mounts private");
  if (mount("tmpfs", plan.root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=8m,nr_inodes=4096,mode=0755") != 0)
    child_fail(kSetupFailed, "mount tmpfs");
  for (const auto& d : plan.mkdirs)
    if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) child_fail(kSetupFailed, "mkdir");
  for (const auto& [target, link] : plan.symlinks)
    if (symlink(target.c_str(), link.c_str()) != 0) child_fail(kSetupFailed, "symlink");
  for (const auto& [src, dst] : plan.binds) {
    if (mount(src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) child_fail(kSetupFailed, "bind mount");
    if (mount(nullptr, dst.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
      child_fail(kSetupFailed, "read-only remount");
  }
  if (chmod(plan.tmp_dir.c_str(), 01777) != 0) child_fail(kSetupFailed, "chmod tmp");
  // The source arrives on stdin and becomes a real file so that clang can put
  // the text of each line into BTF line info (the verifier log shows it).
  {
    int fd = open(plan.source_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) child_fail(kSetupFailed, "create source file");
    static char chunk[65536];
    for (;;) {
      ssize_t n = read(STDIN_FILENO, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) child_fail(kSetupFailed, "read source");
      if (n == 0) break;
      for (ssize_t off = 0; off < n;) {
        ssize_t w = write(fd, chunk + off, static_cast<size_t>(n - off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) child_fail(kSetupFailed, "write source");
        off += w;
      }
    }
    close(fd);
  }
  if (chdir(plan.root.c_str()) != 0 || chroot(".") != 0 || chdir("/tmp") != 0) child_fail(kSetupFailed, "chroot");
}

// The compiler's limits: CPU time, address space, file size, open files, no core.
void set_child_limits(const SandboxConfig& cfg) {
  const rlim_t cpu = static_cast<rlim_t>((cfg.timeout_ms + 999) / 1000);
  struct rlimit r;
  r = {cpu, cpu + 1};
  if (setrlimit(RLIMIT_CPU, &r) != 0) child_fail(kSetupFailed, "RLIMIT_CPU");
  r = {static_cast<rlim_t>(cfg.memory_bytes), static_cast<rlim_t>(cfg.memory_bytes)};
  if (setrlimit(RLIMIT_AS, &r) != 0) child_fail(kSetupFailed, "RLIMIT_AS");
  r = {rlim_t{64} << 20, rlim_t{64} << 20};
  if (setrlimit(RLIMIT_FSIZE, &r) != 0) child_fail(kSetupFailed, "RLIMIT_FSIZE");
  r = {64, 64};
  if (setrlimit(RLIMIT_NOFILE, &r) != 0) child_fail(kSetupFailed, "RLIMIT_NOFILE");
  r = {0, 0};
  setrlimit(RLIMIT_CORE, &r);
}

// Namespace mode, confined: runs clang, copies its dependency file to fd 3
// and exits as clang did.
[[noreturn]] void run_compiler_copy_deps(const SandboxPlan& plan, char* const* argv, char* const* envp) {
  pid_t compiler = fork();
  if (compiler < 0) child_fail(kSetupFailed, "fork compiler");
  if (compiler == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(kDepsFd);
    execve(plan.exe.c_str(), argv, envp);
    child_fail(kExecFailed, "exec compiler");
  }
  int status = 0;
  while (waitpid(compiler, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    int fd = open("/tmp/prog.d", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    static char chunk[65536];
    for (ssize_t n; fd >= 0 && (n = read(fd, chunk, sizeof chunk)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      for (ssize_t off = 0; off < n;) {
        ssize_t w = write(kDepsFd, chunk + off, static_cast<size_t>(n - off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) _exit(kSetupFailed);
        off += w;
      }
    }
  }
  close(kDepsFd);
  if (WIFSIGNALED(status)) {
    // Die the way the compiler died (the parent tells limits by the signal).
    signal(WTERMSIG(status), SIG_DFL);
    kill(getpid(), WTERMSIG(status));
    _exit(128 + WTERMSIG(status));
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : kSetupFailed);
}

// Runs in the forked child: syscalls only, no allocation.
[[noreturn]] void run_child(const SandboxPlan& plan, char* const* argv, char* const* envp, int in_fd, int out_fd,
                            int err_fd, int deps_fd, uid_t uid, gid_t gid, const SandboxConfig& cfg) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (dup2(in_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0) _exit(kSetupFailed);
  // Namespace mode: fd 3 carries clang's dependency list back out of the tmpfs.
  const int keep_from = plan.mode == SandboxMode::namespaces && deps_fd >= 0 ? 4 : 3;
  if (keep_from == 4 && dup2(deps_fd, kDepsFd) < 0) _exit(kSetupFailed);
  // Nothing of the daemon's (sockets, maps, model files) may leak into the compiler.
  if (syscall(SYS_close_range, static_cast<unsigned>(keep_from), ~0u, 0u) != 0) {
    struct rlimit nofile {};
    getrlimit(RLIMIT_NOFILE, &nofile);
    for (rlim_t fd = keep_from; fd < std::min<rlim_t>(nofile.rlim_cur, 1 << 20); ++fd) close(static_cast<int>(fd));
  }
  // Restore default signal dispositions the daemon may have changed.
  for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  if (plan.mode == SandboxMode::landlock) {
    if (chdir(plan.cwd.c_str()) != 0) child_fail(kSetupFailed, "chdir");
  } else {
    enter_private_root(plan);
  }

  set_child_limits(cfg);

  if (plan.mode == SandboxMode::landlock) {
    // Still uid 0 but without any capability; no_new_privs keeps execve from
    // handing them back, Landlock keeps root-owned files out of reach.
    if (!drop_all_capabilities()) child_fail(kSetupFailed, "drop capabilities");
  } else {
    if (setgroups(0, nullptr) != 0) child_fail(kSetupFailed, "setgroups");
    if (setresgid(gid, gid, gid) != 0) child_fail(kSetupFailed, "setresgid");
    if (setresuid(uid, uid, uid) != 0) child_fail(kSetupFailed, "setresuid");
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child_fail(kSetupFailed, "no_new_privs");
  if (int e = landlock_confine(plan.landlock_rules.data(), plan.landlock_rules.size()); e != 0) {
    errno = e;
    if (plan.landlock_required) child_fail(kSetupFailed, "landlock");
  }
  if (plan.mode == SandboxMode::landlock) {
    execve(plan.exe.c_str(), argv, envp);
    child_fail(kExecFailed, "exec compiler");
  }
  // Namespace mode: the dependency file lives in the private tmpfs, so this
  // process (already confined) waits for clang and copies it to fd 3.
  run_compiler_copy_deps(plan, argv, envp);
}

std::string first_line_of(const std::string& s) {
  size_t nl = s.find('\n');
  std::string l = nl == std::string::npos ? s : s.substr(0, nl);
  return l.size() > 300 ? l.substr(0, 300) + "..." : l;
}

bool contains_any(const std::string& s, std::initializer_list<const char*> needles) {
  for (const char* n : needles)
    if (s.find(n) != std::string::npos) return true;
  return false;
}

// Can this process build the namespace sandbox? Tried once, for real, in a child.
bool namespaces_work(const std::string& work_dir) {
  static std::once_flag once;
  static bool works = false;
  std::call_once(once, [&] {
    std::string dir = work_dir + "/qwen3-verify-probe-XXXXXX";
    if (!mkdtemp(dir.data())) return;
    uid_t uid;
    gid_t gid;
    get_nobody(uid, gid);
    pid_t pid = fork();
    if (pid == 0) {
      int devnull = open("/dev/null", O_WRONLY);
      if (devnull >= 0) dup2(devnull, STDERR_FILENO);
      bool ok = unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) == 0 &&
                mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
                mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") == 0 &&
                chdir(dir.c_str()) == 0 && chroot(".") == 0 && setgroups(0, nullptr) == 0 &&
                setresgid(gid, gid, gid) == 0 && setresuid(uid, uid, uid) == 0;
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    if (pid > 0)
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    rmdir(dir.c_str());
    works = pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  });
  return works;
}

}  // namespace

namespace {

// The sandbox to use: the configured one, or for `automatic` the strongest that works here.
std::optional<SandboxMode> resolve_mode(const SandboxConfig& cfg) {
  if (cfg.mode != SandboxMode::automatic) return cfg.mode;
  if (namespaces_work(cfg.work_dir)) return SandboxMode::namespaces;
  if (landlock_abi() >= 1) return SandboxMode::landlock;
  return std::nullopt;
}

// The four channels to the compiler child; whatever is still open is closed on destruction.
struct ChildChannels {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, deps[2] = {-1, -1};
  ~ChildChannels() {
    for (int* pair : {in, out, err, deps})
      for (int i : {0, 1})
        if (pair[i] >= 0) close(pair[i]);
  }
  // stdin is a socket so a compiler that stops reading cannot SIGPIPE the daemon.
  std::string open_all() {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) return std::string("socketpair: ") + strerror(errno);
    for (int* pair : {out, err, deps})
      if (pipe2(pair, O_CLOEXEC) != 0) return std::string("pipe: ") + strerror(errno);
    return "";
  }
  void close_child_ends() {
    for (int* pair : {in, out, err, deps}) {
      close(pair[1]);
      pair[1] = -1;
    }
  }
  // Hands the parent's ends over (they are closed by collect_child from then on).
  ChildStreams release_parent_ends() {
    ChildStreams s{in[0], out[0], err[0], deps[0]};
    in[0] = out[0] = err[0] = deps[0] = -1;
    return s;
  }
};

// Why the compile did not give a usable object, from how the child ended and what it wrote;
// nullopt: it did.
std::optional<std::pair<CompileStatus, std::string>> failure_of(const ChildOutput& out, const CompileOutcome& result,
                                                                 const SandboxConfig& cfg) {
  using F = std::pair<CompileStatus, std::string>;
  const std::string& raw_err = out.stderr_text;
  const std::string limits_text = "(limits: " + std::to_string(cfg.timeout_ms) + " ms, " +
                                  std::to_string(cfg.memory_bytes >> 20) + " MiB)";
  if (out.timed_out)
    return F{CompileStatus::limit_exceeded,
             "compiler exceeded the time limit of " + std::to_string(cfg.timeout_ms) + " ms and was killed"};
  if (out.deps_too_big)
    return F{CompileStatus::forbidden_input,
             "the compiler's list of files read exceeded " + std::to_string(kMaxDepsBytes) + " bytes"};
  if (out.object_too_big)
    return F{CompileStatus::limit_exceeded, "compiler output exceeded " + std::to_string(cfg.max_object_bytes) + " bytes"};
  if (WIFSIGNALED(out.status)) {
    int sig = WTERMSIG(out.status);
    if (sig == SIGXCPU || sig == SIGKILL)
      return F{CompileStatus::limit_exceeded, "compiler exceeded the CPU time limit " + limits_text};
    if (contains_any(raw_err, {"out of memory", "Allocation failed", "bad_alloc", "Cannot allocate memory"}))
      return F{CompileStatus::limit_exceeded, "compiler ran out of memory " + limits_text};
    return F{CompileStatus::limit_exceeded,
             std::string("compiler crashed (") + strsignal(sig) + "), likely a resource limit " + limits_text};
  }
  int code = WIFEXITED(out.status) ? WEXITSTATUS(out.status) : -1;
  if (code == kSetupFailed || code == kExecFailed)
    return F{CompileStatus::infrastructure, "compiler sandbox failed: " + result.diagnostics};
  if (contains_any(raw_err, {"LLVM ERROR: out of memory", "Allocation failed", "std::bad_alloc",
                             "failed to map segment", "Cannot allocate memory"}))
    return F{CompileStatus::limit_exceeded, "compiler ran out of memory " + limits_text};
  if (raw_err.find("error while loading shared libraries") != std::string::npos)
    return F{CompileStatus::infrastructure, "the compiler cannot start in the sandbox: " + first_line_of(raw_err)};
  if (code != 0 || result.object.empty()) {
    size_t errors = 0;
    std::string first;
    for (const auto& d : result.parsed)
      if (d.text.rfind("error", 0) == 0 || d.text.rfind("fatal", 0) == 0) {
        if (errors++ == 0) first = d.stage_message;
      }
    if (errors == 0)
      return F{CompileStatus::compile_error,
               "compilation failed (exit " + std::to_string(code) + "): " + first_line_of(result.diagnostics)};
    return F{CompileStatus::compile_error,
             "compilation failed with " + std::to_string(errors) + " error(s)" + (first.empty() ? "" : ": " + first)};
  }
  return std::nullopt;
}

// Decides what was read from what clang itself reports, not from the policy's reading of the
// source: every file must be the program or lie in the private include tree. Rewrites the names
// as the user would write them; returns the first file outside, or "".
std::string file_outside(std::vector<std::string>& files_read, const std::string& main_file, const std::string& tree) {
  for (std::string& f : files_read) {
    const std::string normal = fs::path(f).lexically_normal().string();
    // The tree holds regular files only (no symlinks), so the lexical form is the real one.
    const bool inside = normal == main_file || normal.rfind(tree + "/", 0) == 0;
    if (normal == main_file) f = "prog.c";
    else if (normal.rfind(tree + "/", 0) == 0) f = normal.substr(tree.size() + 1);
    if (!inside) return f;
  }
  return "";
}

}  // namespace

CompileOutcome compile_in_sandbox(const std::string& source, const SandboxConfig& cfg) {
  CompileOutcome result;
  const auto start = Clock::now();
  auto finish = [&](CompileStatus status, std::string message) {
    if (status != CompileStatus::ok) result.object.clear();
    result.status = status;
    result.message = std::move(message);
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  };

  const std::string clang_real = resolve_executable(cfg.clang);
  if (clang_real.empty()) return finish(CompileStatus::infrastructure, "compiler '" + cfg.clang + "' not found");
  if (cfg.include_dir.empty() || !fs::is_directory(cfg.include_dir))
    return finish(CompileStatus::infrastructure, "include tree '" + cfg.include_dir + "' is missing");
  const std::optional<SandboxMode> resolved = resolve_mode(cfg);
  if (!resolved)
    return finish(CompileStatus::infrastructure,
                  "no compiler sandbox is available: mount namespaces are not permitted (needs CAP_SYS_ADMIN, "
                  "CAP_SYS_CHROOT, CAP_SETUID, CAP_SETGID, mount/unshare) and Landlock is disabled or filtered");
  const SandboxMode mode = *resolved;

  std::string tmpl = cfg.work_dir + "/qwen3-verify-XXXXXX";
  if (!mkdtemp(tmpl.data()))
    return finish(CompileStatus::infrastructure, "cannot create a sandbox dir in " + cfg.work_dir + ": " + strerror(errno));
  SandboxPlan plan;
  plan.root = tmpl;
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      fs::remove_all(path, ec);  // never follows symlinks
    }
  } remove_dir{tmpl};
  std::string why;
  if (mode == SandboxMode::landlock) {
    // The source is written here by the daemon; the compiler may read it and use tmp/.
    std::error_code ec;
    fs::create_directories(tmpl + "/tmp", ec);
    std::ofstream(tmpl + "/prog.c", std::ios::binary) << source;
    chmod(tmpl.c_str(), 0755);
    why = build_landlock_plan(plan, cfg, clang_real, tmpl);
    result.sandbox = "landlock";
  } else {
    why = build_plan(plan, cfg, clang_real);
    result.sandbox = landlock_abi() >= 1 ? "namespaces+landlock" : "namespaces";
  }
  if (!why.empty()) return finish(CompileStatus::infrastructure, why);
  finish_landlock_rules(plan, plan.executable_dirs);

  std::vector<char*> argv, envp;
  for (auto& a : plan.args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : plan.env) envp.push_back(e.data());
  envp.push_back(nullptr);
  uid_t uid;
  gid_t gid;
  get_nobody(uid, gid);

  ChildChannels ch;
  if (std::string err = ch.open_all(); !err.empty()) return finish(CompileStatus::infrastructure, err);
  pid_t pid = fork();
  if (pid == 0) run_child(plan, argv.data(), envp.data(), ch.in[1], ch.out[1], ch.err[1], ch.deps[1], uid, gid, cfg);
  ch.close_child_ends();
  if (pid < 0) return finish(CompileStatus::infrastructure, std::string("fork: ") + strerror(errno));

  // In namespace mode the child reads the source from stdin into its tmpfs.
  const ChildLimits limits{start + std::chrono::milliseconds(cfg.timeout_ms), cfg.max_object_bytes,
                           cfg.max_diagnostic_bytes, kMaxDepsBytes};
  ChildOutput out = collect_child(pid, ch.release_parent_ends(), mode == SandboxMode::landlock ? "" : source, limits);
  if (mode == SandboxMode::landlock) {
    std::ifstream in(tmpl + "/tmp/prog.d", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out.deps_text = ss.str().substr(0, kMaxDepsBytes + 1);
    out.deps_too_big = out.deps_text.size() > kMaxDepsBytes;
    // Landlock mode compiles at host paths: show them like the namespace mode does.
    for (const auto& [from, to] : {std::pair<std::string, std::string>{tmpl + "/prog.c", "/src/prog.c"},
                                   std::pair<std::string, std::string>{cfg.include_dir + "/", "/inc/"}})
      for (size_t p; (p = out.stderr_text.find(from)) != std::string::npos;) out.stderr_text.replace(p, from.size(), to);
  }
  result.object = std::move(out.object);
  result.diagnostics = scrub_compiler_output(out.stderr_text);
  result.parsed = parse_clang_diagnostics(result.diagnostics);
  if (auto failed = failure_of(out, result, cfg)) return finish(failed->first, failed->second);

  result.files_read = parse_dependency_list(out.deps_text);
  if (result.files_read.empty())
    return finish(CompileStatus::infrastructure, "the compiler did not report which files it read (-MD)");
  const std::string main_file = mode == SandboxMode::landlock ? tmpl + "/prog.c" : "/src/prog.c";
  const std::string tree = mode == SandboxMode::landlock ? cfg.include_dir : "/inc";
  if (std::string f = file_outside(result.files_read, main_file, tree); !f.empty()) {
    result.forbidden_file = f;
    return finish(CompileStatus::forbidden_input,
                  "clang reports that it read " + f.substr(0, 200) +
                      ", which is outside the allowed headers (only prog.c and the private include tree may be read)");
  }
  return finish(CompileStatus::ok, "compiled to " + std::to_string(result.object.size()) + " bytes");
}

}  // namespace qwen3::verify
