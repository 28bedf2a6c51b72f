#include "verify/bpf_loader.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <nlohmann/json.hpp>

namespace qwen3::verify {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kLogBufBytes = size_t{4} << 20;
constexpr size_t kLogTailBytes = 96 * 1024;  // what is kept of each log for the parent
constexpr size_t kLibbpfMessageBytes = 16 * 1024;

std::string libbpf_messages;  // only used in the child process

int capture_libbpf_print(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG || libbpf_messages.size() >= kLibbpfMessageBytes) return 0;
  char buf[2048];
  int n = vsnprintf(buf, sizeof buf, fmt, args);
  if (n > 0) libbpf_messages.append(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
  return 0;
}

std::string tail(const char* buf, size_t cap) {
  std::string s(buf, strnlen(buf, kLogBufBytes));
  if (s.size() > cap) {
    s = s.substr(s.size() - cap);
    size_t nl = s.find('\n');
    if (nl != std::string::npos) s = s.substr(nl + 1);
  }
  return s;
}

bool drop_to_bpf_capabilities(bool with_perfmon) {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {};
  uint64_t keep = (uint64_t{1} << CAP_BPF) | (uint64_t{1} << CAP_NET_ADMIN);
  if (with_perfmon) keep |= uint64_t{1} << CAP_PERFMON;
  data[0].effective = data[0].permitted = static_cast<uint32_t>(keep);
  data[1].effective = data[1].permitted = static_cast<uint32_t>(keep >> 32);
  return syscall(SYS_capset, &header, data) == 0;
}

bool map_type_allowed(enum bpf_map_type t) {
  switch (t) {
    case BPF_MAP_TYPE_ARRAY:
    case BPF_MAP_TYPE_HASH:
    case BPF_MAP_TYPE_PERCPU_ARRAY:
    case BPF_MAP_TYPE_PERCPU_HASH:
    case BPF_MAP_TYPE_LRU_HASH:
    case BPF_MAP_TYPE_LRU_PERCPU_HASH:
    case BPF_MAP_TYPE_LPM_TRIE:
    case BPF_MAP_TYPE_DEVMAP:
    case BPF_MAP_TYPE_DEVMAP_HASH:
    case BPF_MAP_TYPE_CPUMAP:
    case BPF_MAP_TYPE_XSKMAP:
    case BPF_MAP_TYPE_PROG_ARRAY:
    case BPF_MAP_TYPE_RINGBUF:
    case BPF_MAP_TYPE_QUEUE:
    case BPF_MAP_TYPE_STACK:
    case BPF_MAP_TYPE_BLOOM_FILTER:
      return true;
    default:
      return false;
  }
}

std::string check_calls(const struct bpf_program* prog);

// Opens the ELF and checks what the object would create. Returns null with
// report.reject_reason set when it must not be loaded.
struct bpf_object* open_checked(const std::string& object, const LoaderConfig& cfg, LoadReport& report,
                                struct bpf_program** out_prog) {
  LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "prog");
  struct bpf_object* obj = bpf_object__open_mem(object.data(), object.size(), &opts);
  if (!obj) {
    report.reject_reason = std::string("libbpf cannot open the object: ") + strerror(errno);
    return nullptr;
  }
  report.opened = true;
  int count = 0;
  struct bpf_program* prog = nullptr;
  struct bpf_program* p;
  bpf_object__for_each_program(p, obj) {
    ++count;
    prog = p;
  }
  if (count != 1) {
    report.reject_reason = "the object has " + std::to_string(count) + " programs; exactly one XDP program is required";
    bpf_object__close(obj);
    return nullptr;
  }
  if (bpf_program__type(prog) != BPF_PROG_TYPE_XDP) {
    bpf_program__set_type(prog, BPF_PROG_TYPE_XDP);
    bpf_program__set_expected_attach_type(prog, BPF_XDP);
  }
  report.program_name = bpf_program__name(prog);
  if (std::string why = check_calls(prog); !why.empty()) {
    report.reject_reason = why;
    bpf_object__close(obj);
    return nullptr;
  }
  size_t total = 0;
  const size_t cpus = static_cast<size_t>(std::max(1, libbpf_num_possible_cpus()));
  struct bpf_map* m;
  bpf_object__for_each_map(m, obj) {
    if (bpf_map__pin_path(m)) {
      report.reject_reason = std::string("map '") + bpf_map__name(m) + "' asks to be pinned; pinning is not allowed";
      bpf_object__close(obj);
      return nullptr;
    }
    enum bpf_map_type t = bpf_map__type(m);
    if (!map_type_allowed(t)) {
      report.reject_reason = std::string("map '") + bpf_map__name(m) + "' has type " +
                             (libbpf_bpf_map_type_str(t) ? libbpf_bpf_map_type_str(t) : "?") +
                             ", which is not allowed in the verification service";
      bpf_object__close(obj);
      return nullptr;
    }
    size_t per = size_t{bpf_map__key_size(m)} + bpf_map__value_size(m);
    if (t == BPF_MAP_TYPE_PERCPU_ARRAY || t == BPF_MAP_TYPE_PERCPU_HASH || t == BPF_MAP_TYPE_LRU_PERCPU_HASH)
      per = bpf_map__key_size(m) + size_t{bpf_map__value_size(m)} * cpus;
    if (t == BPF_MAP_TYPE_RINGBUF) per = 1;
    total += per * bpf_map__max_entries(m);
  }
  if (total > cfg.max_map_bytes) {
    report.reject_reason = "the program's maps need " + std::to_string(total) + " bytes; the limit is " +
                           std::to_string(cfg.max_map_bytes);
    bpf_object__close(obj);
    return nullptr;
  }
  *out_prog = prog;
  return obj;
}

// Helpers that would let a program copy kernel or user memory (or kernel
// addresses) into the packet the caller gets back. The verifier offers them
// to XDP once CAP_PERFMON is held, so they are refused here, by instruction.
const char* forbidden_helper(int32_t id) {
  switch (id) {
    case BPF_FUNC_probe_read: return "bpf_probe_read";
    case BPF_FUNC_probe_read_str: return "bpf_probe_read_str";
    case BPF_FUNC_probe_read_kernel: return "bpf_probe_read_kernel";
    case BPF_FUNC_probe_read_kernel_str: return "bpf_probe_read_kernel_str";
    case BPF_FUNC_probe_read_user: return "bpf_probe_read_user";
    case BPF_FUNC_probe_read_user_str: return "bpf_probe_read_user_str";
    case BPF_FUNC_copy_from_user: return "bpf_copy_from_user";
    case BPF_FUNC_copy_from_user_task: return "bpf_copy_from_user_task";
    case BPF_FUNC_get_current_task: return "bpf_get_current_task";
    case BPF_FUNC_get_current_task_btf: return "bpf_get_current_task_btf";
    case BPF_FUNC_task_pt_regs: return "bpf_task_pt_regs";
    case BPF_FUNC_per_cpu_ptr: return "bpf_per_cpu_ptr";
    case BPF_FUNC_this_cpu_ptr: return "bpf_this_cpu_ptr";
    case BPF_FUNC_snprintf_btf: return "bpf_snprintf_btf";
    case BPF_FUNC_trace_printk: return "bpf_trace_printk";
    case BPF_FUNC_trace_vprintk: return "bpf_trace_vprintk";
    case BPF_FUNC_send_signal: return "bpf_send_signal";
    case BPF_FUNC_send_signal_thread: return "bpf_send_signal_thread";
    default: return nullptr;
  }
}

// Empty if every call is to an allowed helper or a BPF subprogram.
std::string check_calls(const struct bpf_program* prog) {
  const struct bpf_insn* insns = bpf_program__insns(prog);
  size_t n = bpf_program__insn_cnt(prog);
  for (size_t i = 0; i < n; ++i) {
    const struct bpf_insn& in = insns[i];
    if (in.code != (BPF_JMP | BPF_CALL)) continue;
    if (in.src_reg == BPF_PSEUDO_KFUNC_CALL)
      return "instruction " + std::to_string(i) + " calls a kernel function (kfunc); kfuncs are not allowed";
    if (in.src_reg == 0) {
      if (const char* name = forbidden_helper(in.imm))
        return "instruction " + std::to_string(i) + " calls " + name +
               ", which reads kernel/user memory, signals the loader or prints to the trace buffer; "
               "it is not allowed in the verification service";
    }
  }
  return "";
}

bool mentions_complexity_limit(const std::string& log) {
  return log.find("program is too large") != std::string::npos || log.find("too complex") != std::string::npos;
}

void write_all(int fd, const std::vector<uint8_t>& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t w = write(fd, bytes.data() + off, bytes.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += static_cast<size_t>(w);
  }
}


// The child reports in frames: [u32 length][msgpack]. A partial report goes
// out before the slow level-2 retry, so a time-out there still leaves the
// level-1 diagnosis with the parent.
void write_frame(int fd, const json& report) {
  std::vector<uint8_t> body = json::to_msgpack(report);
  uint32_t len = static_cast<uint32_t>(body.size());
  std::vector<uint8_t> frame(sizeof len);
  std::memcpy(frame.data(), &len, sizeof len);
  frame.insert(frame.end(), body.begin(), body.end());
  write_all(fd, frame);
}

json run_in_child(const std::string& object, const std::vector<PacketInput>& packets, const LoaderConfig& cfg,
                  int report_fd) {
  LoadReport report;
  json out;
  libbpf_set_print(capture_libbpf_print);
  if (!drop_to_bpf_capabilities(!cfg.minimal_capabilities)) {
    out["reject_reason"] = std::string("cannot switch the loader to CAP_BPF+CAP_NET_ADMIN") +
                           (cfg.minimal_capabilities ? "" : "+CAP_PERFMON") + ": " + strerror(errno) +
                           " (the daemon needs these capabilities)";
    out["infrastructure"] = true;
    return out;
  }
  std::vector<char> log(kLogBufBytes);
  struct bpf_program* prog = nullptr;
  struct bpf_object* obj = open_checked(object, cfg, report, &prog);
  out["opened"] = report.opened;
  if (!obj) {
    out["reject_reason"] = report.reject_reason;
    out["libbpf"] = libbpf_messages;
    return out;
  }
  out["program_name"] = report.program_name;
  // Level 0 first; on failure libbpf itself retries at level 1 into our buffer.
  log[0] = 0;
  bpf_program__set_log_buf(prog, log.data(), log.size());
  bpf_program__set_log_level(prog, 0);
  int err = bpf_object__load(obj);
  if (err) {
    out["load_errno"] = -err;
    out["log1"] = tail(log.data(), kLogTailBytes);
    bpf_object__close(obj);
    out["libbpf"] = libbpf_messages;
    write_frame(report_fd, out);
    // Level 2 adds the register state at each step; skipped when the program
    // hit the complexity limit (a level-2 walk of a million instructions is slow).
    if (!mentions_complexity_limit(out["log1"].get<std::string>())) {
      struct bpf_program* prog2 = nullptr;
      LoadReport again;
      struct bpf_object* obj2 = open_checked(object, cfg, again, &prog2);
      if (obj2) {
        log[0] = 0;
        bpf_program__set_log_buf(prog2, log.data(), log.size());
        bpf_program__set_log_level(prog2, 2);
        if (bpf_object__load(obj2)) out["log2"] = tail(log.data(), kLogTailBytes);
        bpf_object__close(obj2);
      }
    }
    out["libbpf"] = libbpf_messages;
    return out;
  }
  // Subprograms are appended only during load: check the final instructions
  // again before anything runs (the program is still only loaded, never run).
  if (std::string why = check_calls(prog); !why.empty()) {
    out["reject_reason"] = why;
    out["libbpf"] = libbpf_messages;
    bpf_object__close(obj);
    return out;
  }
  out["loaded"] = true;
  int fd = bpf_program__fd(prog);
  struct bpf_prog_info info = {};
  __u32 len = sizeof info;
  if (bpf_prog_get_info_by_fd(fd, &info, &len) == 0) out["verified_insns"] = info.verified_insns;

  json runs = json::array();
  std::vector<uint8_t> data_out(64 * 1024);
  for (const auto& pkt : packets) {
    json r;
    r["name"] = pkt.name;
    LIBBPF_OPTS(bpf_test_run_opts, t);
    t.data_in = pkt.bytes.data();
    t.data_size_in = static_cast<__u32>(pkt.bytes.size());
    t.data_out = data_out.data();
    t.data_size_out = static_cast<__u32>(data_out.size());
    t.repeat = 1;
    int rc = bpf_prog_test_run_opts(fd, &t);
    if (rc != 0) {
      int e = errno;
      r["ran"] = false;
      r["errno"] = e;
      r["error"] = std::string("BPF_PROG_TEST_RUN failed: ") + strerror(e);
    } else {
      r["ran"] = true;
      r["retval"] = t.retval;
      r["output"] = json::binary_t(std::vector<uint8_t>(
          data_out.begin(), data_out.begin() + std::min<size_t>(t.data_size_out, data_out.size())));
    }
    runs.push_back(std::move(r));
  }
  out["runs"] = std::move(runs);
  out["libbpf"] = libbpf_messages;
  bpf_object__close(obj);
  return out;
}

}  // namespace

LoadReport load_and_run(const std::string& object, const std::vector<PacketInput>& packets,
                        const LoaderConfig& cfg) {
  LoadReport report;
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    report.child_failure = std::string("pipe: ") + strerror(errno);
    return report;
  }
  const auto start = Clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    report.child_failure = std::string("fork: ") + strerror(errno);
    return report;
  }
  if (pid == 0) {
    close(pipefd[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    try {
      write_frame(pipefd[1], run_in_child(object, packets, cfg, pipefd[1]));
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  close(pipefd[1]);
  std::string data;
  char buf[65536];
  const auto deadline = start + std::chrono::milliseconds(cfg.timeout_ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      report.timed_out = true;
      break;
    }
    struct pollfd p = {pipefd[0], POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (rc < 0 && errno != EINTR) break;
    if (rc <= 0) continue;
    ssize_t r = read(pipefd[0], buf, sizeof buf);
    if (r > 0) {
      data.append(buf, static_cast<size_t>(r));
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    break;
  }
  close(pipefd[0]);
  int status = 0;
  if (report.timed_out) kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // The last complete frame is the report (earlier ones are partial).
  std::string last;
  for (size_t off = 0; off + 4 <= data.size();) {
    uint32_t len;
    std::memcpy(&len, data.data() + off, sizeof len);
    if (off + 4 + len > data.size()) break;
    last = data.substr(off + 4, len);
    off += 4 + len;
  }
  const bool partial = report.timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  if (partial && !last.empty()) {
    // Killed during the level-2 retry: the level-1 diagnosis stands.
    data = last;
  } else if (report.timed_out) {
    report.child_failure = "loading and test-running exceeded the time limit of " + std::to_string(cfg.timeout_ms) +
                           " ms; the loader was killed";
    return report;
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    report.child_failure = WIFSIGNALED(status)
                               ? std::string("the loader process died (") + strsignal(WTERMSIG(status)) + ")"
                               : "the loader process failed (exit " + std::to_string(WEXITSTATUS(status)) + ")";
    return report;
  } else {
    data = last;
  }
  try {
    json j = json::from_msgpack(data);
    report.finished = true;
    report.opened = j.value("opened", false);
    report.loaded = j.value("loaded", false);
    report.reject_reason = j.value("reject_reason", "");
    report.infrastructure = j.value("infrastructure", false);
    report.libbpf_messages = j.value("libbpf", "");
    report.load_errno = j.value("load_errno", 0);
    report.log_level1 = j.value("log1", "");
    report.log_level2 = j.value("log2", "");
    report.verified_insns = j.value("verified_insns", 0u);
    report.program_name = j.value("program_name", "");
    if (j.contains("runs")) {
      for (const auto& r : j["runs"]) {
        PacketRun run;
        run.name = r.value("name", "");
        run.ran = r.value("ran", false);
        run.retval = r.value("retval", 0u);
        run.error = r.value("error", "");
        run.error_errno = r.value("errno", 0);
        if (r.contains("output")) {
          const auto& b = r["output"].get_binary();
          run.output.assign(b.begin(), b.end());
        }
        report.runs.push_back(std::move(run));
      }
    }
  } catch (const std::exception& e) {
    report.finished = false;
    report.child_failure = std::string("cannot read the loader's report: ") + e.what();
  }
  return report;
}

}  // namespace qwen3::verify
