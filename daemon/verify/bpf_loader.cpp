#include "verify/bpf_loader.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
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
#include <memory>
#include <set>
#include <bpf/btf.h>
#include <time.h>

#include "verify/object_limits.h"

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

// CAP_BPF + CAP_NET_ADMIN only: without CAP_PERFMON (and CAP_SYS_ADMIN) the
// verifier refuses uninitialised stack reads and pointer leaks into packets
// and maps, as for an unprivileged loader, so no kernel memory reaches a fixture's output.
bool drop_to_bpf_capabilities() {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {};
  const uint64_t keep = (uint64_t{1} << CAP_BPF) | (uint64_t{1} << CAP_NET_ADMIN);
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
    case BPF_MAP_TYPE_PERF_EVENT_ARRAY:  // unattached and without perf fds, output goes nowhere
    case BPF_MAP_TYPE_QUEUE:
    case BPF_MAP_TYPE_STACK:
    case BPF_MAP_TYPE_BLOOM_FILTER:
      return true;
    default:
      return false;
  }
}

std::string check_calls(const struct bpf_program* prog, bool loaded);
std::string check_ksyms(const struct bpf_object* obj);

// The one owner of a libbpf object: closing it frees its programs and maps.
struct ObjectCloser {
  void operator()(struct bpf_object* o) const { bpf_object__close(o); }
};
using Object = std::unique_ptr<struct bpf_object, ObjectCloser>;

// Opens the ELF and checks what the object would create. Returns null with
// report.reject_reason set when it must not be loaded.
Object open_checked(const std::string& object, const LoaderConfig& cfg, LoadReport& report,
                    struct bpf_program** out_prog) {
  LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "prog");
  Object obj(bpf_object__open_mem(object.data(), object.size(), &opts));
  if (!obj) {
    report.reject_reason = std::string("libbpf cannot open the object: ") + strerror(errno);
    return nullptr;
  }
  report.opened = true;
  int count = 0;
  struct bpf_program* prog = nullptr;
  struct bpf_program* p;
  bpf_object__for_each_program(p, obj.get()) {
    ++count;
    prog = p;
  }
  if (count != 1) {
    report.reject_reason = "the object has " + std::to_string(count) + " programs; exactly one XDP program is required";
    return nullptr;
  }
  if (bpf_program__type(prog) != BPF_PROG_TYPE_XDP) {
    bpf_program__set_type(prog, BPF_PROG_TYPE_XDP);
    bpf_program__set_expected_attach_type(prog, BPF_XDP);
  }
  report.program_name = bpf_program__name(prog);
  for (std::string why : {elf_kfunc_refusal(object), check_ksyms(obj.get()), check_calls(prog, false)})
    if (!why.empty()) {
      report.reject_reason = why;
      return nullptr;
    }
  struct bpf_map* m;
  bpf_object__for_each_map(m, obj.get()) {
    if (bpf_map__pin_path(m)) {
      report.reject_reason = std::string("map '") + bpf_map__name(m) + "' asks to be pinned; pinning is not allowed";
      return nullptr;
    }
    enum bpf_map_type t = bpf_map__type(m);
    if (!map_type_allowed(t)) {
      report.reject_reason = std::string("map '") + bpf_map__name(m) + "' has type " +
                             (libbpf_bpf_map_type_str(t) ? libbpf_bpf_map_type_str(t) : "?") +
                             ", which is not allowed in the verification service";
      return nullptr;
    }
  }
  if (std::string why = check_map_memory(obj.get(), cfg.max_map_bytes); !why.empty()) {
    report.reject_reason = why;
    return nullptr;
  }
  *out_prog = prog;
  return obj;
}

// The helper's name ("bpf_map_lookup_elem"), from the uapi helper list.
std::string helper_name(int32_t id) {
#define QWEN3_HELPER_NAME(x) "bpf_" #x  // the mapper puts the commas
  static const char* const names[] = {__BPF_FUNC_MAPPER(QWEN3_HELPER_NAME)};
#undef QWEN3_HELPER_NAME
  if (id >= 0 && static_cast<size_t>(id) < sizeof names / sizeof names[0]) return names[id];
  return "helper #" + std::to_string(id);
}

// The kfunc's name, from the kernel's BTF (loaded once per loader child).
std::string kernel_btf_name(uint32_t id) {
  static struct btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) return "";
  const struct btf_type* t = btf__type_by_id(vmlinux, id);
  return t ? btf__name_by_offset(vmlinux, t->name_off) : "";
}

// Externs the object declares in .ksyms: kfuncs must be on the allowlist,
// kernel variables are refused (a typed ksym is a BTF pointer into kernel
// memory, an untyped one a kernel address).
std::string check_ksyms(const struct bpf_object* obj) {
  const struct btf* btf = bpf_object__btf(obj);
  if (!btf) return "";
  const uint32_t n = btf__type_cnt(btf);
  for (uint32_t id = 1; id < n; ++id) {
    const struct btf_type* t = btf__type_by_id(btf, id);
    // Every extern function is a kfunc (libbpf points their .ksyms entries at
    // a placeholder variable "dummy_ksym" when it opens the object).
    if (btf_is_func(t) && btf_vlen(t) == BTF_FUNC_EXTERN) {  // a FUNC keeps its linkage in vlen
      const std::string name = btf__name_by_offset(btf, t->name_off);
      if (std::string why = kfunc_refusal(name); !why.empty())
        return "the program calls the kfunc " + name + ": " + why + "; it is not allowed in the verification service";
      continue;
    }
    if (!btf_is_datasec(t) || std::string(btf__name_by_offset(btf, t->name_off)) != ".ksyms") continue;
    const struct btf_var_secinfo* v = btf_var_secinfos(t);
    for (uint16_t i = 0; i < btf_vlen(t); ++i, ++v) {
      const struct btf_type* e = btf__type_by_id(btf, v->type);
      const std::string name = btf__name_by_offset(btf, e->name_off);
      if (btf_is_func(e) || (btf_is_var(e) && name == "dummy_ksym")) continue;  // kfuncs: judged above
      return "the program declares the kernel variable " + name +
             " (__ksym): kernel memory read: a kernel symbol's address or a BTF pointer into kernel memory; "
             "it is not allowed in the verification service";
    }
  }
  return "";
}

// Empty if every call is to an allowed helper, an allowed kfunc or a BPF
// subprogram. `loaded`: the instructions are final (kfunc ids resolved).
std::string check_calls(const struct bpf_program* prog, bool loaded) {
  const struct bpf_insn* insns = bpf_program__insns(prog);
  size_t n = bpf_program__insn_cnt(prog);
  for (size_t i = 0; i < n; ++i) {
    const struct bpf_insn& in = insns[i];
    if (in.code == (BPF_LD | BPF_IMM | BPF_DW)) {
      if (in.src_reg == BPF_PSEUDO_BTF_ID)
        return "instruction " + std::to_string(i) +
               " loads a BTF pointer to a kernel variable: kernel memory read; it is not allowed in the verification service";
      ++i;  // the second half of the 16-byte load
      continue;
    }
    if (in.code != (BPF_JMP | BPF_CALL)) continue;
    if (in.src_reg == BPF_PSEUDO_KFUNC_CALL) {
      if (!loaded) continue;  // ids are resolved during load; check_ksyms judged the names
      if (in.off != 0)
        return "instruction " + std::to_string(i) +
               " calls a kfunc of a kernel module; only the kfuncs on the allowlist (all in vmlinux) are allowed";
      const std::string name = kernel_btf_name(static_cast<uint32_t>(in.imm));
      if (std::string why = kfunc_refusal(name); !why.empty())
        return "instruction " + std::to_string(i) + " calls the kfunc " + (name.empty() ? "?" : name) + ": " + why +
               "; it is not allowed in the verification service";
      continue;
    }
    if (in.src_reg == 0) {
      // An id this header does not know: the verifier says whether the kernel
      // knows it ("invalid func", with the line); one it accepted is refused here after loading.
      if (!loaded && (in.imm < 0 || in.imm >= __BPF_FUNC_MAX_ID)) continue;
      if (std::string why = helper_refusal(in.imm); !why.empty())
        return "instruction " + std::to_string(i) + " calls " + helper_name(in.imm) + ": " + why +
               "; it is not allowed in the verification service";
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

bool is_percpu(enum bpf_map_type t) {
  return t == BPF_MAP_TYPE_PERCPU_ARRAY || t == BPF_MAP_TYPE_PERCPU_HASH || t == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

// Writes the initial map contents; "" or why not.
std::string write_initial_maps(struct bpf_object* obj, const std::vector<MapWrite>& writes) {
  for (const auto& w : writes) {
    struct bpf_map* m = bpf_object__find_map_by_name(obj, w.map.c_str());
    if (!m) return "initial map contents: the program has no map named '" + w.map + "'";
    if (w.key.size() != bpf_map__key_size(m))
      return "initial map contents for '" + w.map + "': key is " + std::to_string(w.key.size()) +
             " bytes, the map's key size is " + std::to_string(bpf_map__key_size(m));
    if (w.value.size() > bpf_map__value_size(m) || is_percpu(bpf_map__type(m)))
      return "initial map contents for '" + w.map + "': value is " + std::to_string(w.value.size()) +
             " bytes, the map's value size is " + std::to_string(bpf_map__value_size(m)) +
             (is_percpu(bpf_map__type(m)) ? " (per-CPU maps cannot be filled)" : "");
    std::string value = w.value;
    value.resize(bpf_map__value_size(m), '\0');
    if (std::string why = check_device_map_value(m, value); !why.empty()) return why;
    if (bpf_map_update_elem(bpf_map__fd(m), w.key.data(), value.data(), BPF_ANY) != 0)
      return "initial map contents for '" + w.map + "': the kernel refused the element: " + strerror(errno);
  }
  return "";
}

// Reads one element after a run: the value, or sets *error.
std::string read_map_value(struct bpf_object* obj, const std::string& name, const std::string& key, std::string* error) {
  struct bpf_map* m = bpf_object__find_map_by_name(obj, name.c_str());
  if (!m) {
    *error = "the program has no map named '" + name + "'";
    return "";
  }
  if (key.size() != bpf_map__key_size(m)) {
    *error = "key is " + std::to_string(key.size()) + " bytes, the map's key size is " + std::to_string(bpf_map__key_size(m));
    return "";
  }
  const size_t vs = bpf_map__value_size(m);
  const bool percpu = is_percpu(bpf_map__type(m));
  const size_t cpus = percpu ? static_cast<size_t>(std::max(1, libbpf_num_possible_cpus())) : 1;
  const size_t stride = percpu ? (vs + 7) / 8 * 8 : vs;
  std::string buf(stride * cpus, '\0');
  if (bpf_map_lookup_elem(bpf_map__fd(m), key.data(), buf.data()) != 0) {
    *error = errno == ENOENT ? "no element with that key" : std::string("lookup failed: ") + strerror(errno);
    return "";
  }
  if (!percpu) return buf;
  if (vs != 4 && vs != 8) {
    *error = "per-CPU map with " + std::to_string(vs) + "-byte values: only 4- and 8-byte values are summed and checked";
    return "";
  }
  uint64_t sum = 0;
  for (size_t c = 0; c < cpus; ++c) {
    uint64_t v = 0;
    std::memcpy(&v, buf.data() + c * stride, vs);
    sum += v;
  }
  std::string out(vs, '\0');
  std::memcpy(out.data(), &sum, vs);
  return out;
}

// The failed load's logs: level 1 (libbpf's own retry) at once in a first
// frame, then level 2, which adds the register state at each step (skipped
// when the program hit the complexity limit: a level-2 walk of a million
// instructions is slow).
void record_failed_load(const std::string& object, const LoaderConfig& cfg, int err, std::vector<char>& log,
                        json& out, int report_fd) {
  out["load_errno"] = -err;
  out["log1"] = tail(log.data(), kLogTailBytes);
  out["libbpf"] = libbpf_messages;
  write_frame(report_fd, out);
  if (!mentions_complexity_limit(out["log1"].get<std::string>())) {
    struct bpf_program* prog2 = nullptr;
    LoadReport again;
    if (Object obj2 = open_checked(object, cfg, again, &prog2)) {
      log[0] = 0;
      bpf_program__set_log_buf(prog2, log.data(), log.size());
      bpf_program__set_log_level(prog2, 2);
      if (bpf_object__load(obj2.get())) out["log2"] = tail(log.data(), kLogTailBytes);
    }
  }
  out["libbpf"] = libbpf_messages;
}

// Every packet through BPF_PROG_TEST_RUN, with the map values each one asks to read after it.
json run_packets(struct bpf_object* obj, int fd, const std::vector<PacketInput>& packets) {
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
    struct timespec cpu0 = {}, cpu1 = {};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
    int rc = bpf_prog_test_run_opts(fd, &t);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
    r["cpu_ns"] = (cpu1.tv_sec - cpu0.tv_sec) * 1000000000LL + (cpu1.tv_nsec - cpu0.tv_nsec);
    if (rc != 0) {
      int e = errno;
      r["ran"] = false;
      r["errno"] = e;
      r["error"] = std::string("BPF_PROG_TEST_RUN failed: ") + strerror(e);
    } else {
      r["ran"] = true;
      r["retval"] = t.retval;
      r["run_ns"] = t.duration;  // the kernel's measure of the program's run
      r["output"] = json::binary_t(std::vector<uint8_t>(
          data_out.begin(), data_out.begin() + std::min<size_t>(t.data_size_out, data_out.size())));
    }
    json values = json::array();
    for (const auto& [map, key] : pkt.read_maps) {
      std::string err;
      std::string v = read_map_value(obj, map, key, &err);
      values.push_back({{"value", json::binary_t(std::vector<uint8_t>(v.begin(), v.end()))}, {"error", err}});
    }
    r["maps"] = std::move(values);
    runs.push_back(std::move(r));
  }
  return runs;
}

json run_in_child(const std::string& object, const std::vector<PacketInput>& packets, const LoaderConfig& cfg,
                  const std::vector<MapWrite>& initial_maps, int report_fd) {
  LoadReport report;
  json out;
  libbpf_set_print(capture_libbpf_print);
  // A network namespace of its own: devmap values, bpf_fib_lookup and bpf_check_mtu
  // see only its loopback interface, never the host's (best effort: without
  // CAP_SYS_ADMIN, device maps are still limited to ifindex 1).
  out["private_netns"] = unshare(CLONE_NEWNET) == 0;
  if (!drop_to_bpf_capabilities()) {
    out["reject_reason"] = std::string("cannot switch the loader to CAP_BPF+CAP_NET_ADMIN: ") + strerror(errno) +
                           " (the daemon needs these capabilities)";
    out["infrastructure"] = true;
    return out;
  }
  std::vector<char> log(kLogBufBytes);
  struct bpf_program* prog = nullptr;
  Object obj = open_checked(object, cfg, report, &prog);
  out["opened"] = report.opened;
  auto refuse = [&](const char* key, const std::string& why) {
    out[key] = why;
    out["libbpf"] = libbpf_messages;
    return out;
  };
  if (!obj) return refuse("reject_reason", report.reject_reason);
  out["program_name"] = report.program_name;
  // Level 0 first; on failure libbpf itself retries at level 1 into our buffer.
  log[0] = 0;
  bpf_program__set_log_buf(prog, log.data(), log.size());
  bpf_program__set_log_level(prog, 0);
  if (int err = bpf_object__load(obj.get())) {
    obj.reset();  // its maps go before the level-2 load creates them again
    record_failed_load(object, cfg, err, log, out, report_fd);
    return out;
  }
  // Subprograms are appended only during load: check the final instructions
  // again before anything runs (the program is still only loaded, never run).
  if (std::string why = check_calls(prog, true); !why.empty()) return refuse("reject_reason", why);
  int fd = bpf_program__fd(prog);
  struct bpf_prog_info info = {};
  __u32 len = sizeof info;
  const bool have_info = bpf_prog_get_info_by_fd(fd, &info, &len) == 0;
  if (have_info) out["verified_insns"] = info.verified_insns;
  // The loop budget: refused before the first run, which nothing could interrupt.
  // Without the verifier's count, an ordinary loop may run as often as its limit allows.
  const uint64_t walked = have_info ? info.verified_insns : uint64_t{1'000'000};
  LoopVerdict loops = check_loop_budget(obj.get(), prog, walked, cfg.max_loop_iterations, cfg.max_run_work,
                                        [](int32_t id) { return kernel_btf_name(static_cast<uint32_t>(id)); });
  out["loop_iterations"] = loops.bound.iterations;
  out["run_work"] = loops.bound.work;
  if (!loops.refusal.empty()) {
    out["loop_insn"] = loops.bound.in_main ? loops.bound.insn : -1;
    return refuse("reject_reason", loops.refusal);
  }
  out["loaded"] = true;
  if (std::string why = write_initial_maps(obj.get(), initial_maps); !why.empty()) return refuse("map_init_error", why);
  out["runs"] = run_packets(obj.get(), fd, packets);
  out["libbpf"] = libbpf_messages;
  return out;
}

// Reads the child's frames from fd until it closes or the deadline passes
// (then *timed_out).
std::string read_until(int fd, Clock::time_point deadline, bool* timed_out) {
  std::string data;
  char buf[65536];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      *timed_out = true;
      break;
    }
    struct pollfd p = {fd, POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (rc < 0 && errno != EINTR) break;
    if (rc <= 0) continue;
    ssize_t r = read(fd, buf, sizeof buf);
    if (r > 0) {
      data.append(buf, static_cast<size_t>(r));
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    break;
  }
  return data;
}

// The last complete frame is the report (earlier ones are partial).
std::string last_frame(const std::string& data) {
  std::string last;
  for (size_t off = 0; off + 4 <= data.size();) {
    uint32_t len;
    std::memcpy(&len, data.data() + off, sizeof len);
    if (off + 4 + len > data.size()) break;
    last = data.substr(off + 4, len);
    off += 4 + len;
  }
  return last;
}

// The child's report (msgpack) into `report`; throws on a malformed one.
void read_report(const std::string& data, LoadReport& report) {
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
  report.map_init_error = j.value("map_init_error", "");
  report.private_netns = j.value("private_netns", false);
  report.loop_insn = j.value("loop_insn", -1);
  report.loop_iterations = j.value("loop_iterations", uint64_t{0});
  report.run_work = j.value("run_work", uint64_t{0});
  if (j.contains("runs")) {
    for (const auto& r : j["runs"]) {
      PacketRun run;
      run.name = r.value("name", "");
      run.ran = r.value("ran", false);
      run.retval = r.value("retval", 0u);
      run.error = r.value("error", "");
      run.error_errno = r.value("errno", 0);
      run.run_ns = r.value("run_ns", uint64_t{0});
      run.cpu_ns = r.value("cpu_ns", int64_t{0});
      if (r.contains("output")) {
        const auto& b = r["output"].get_binary();
        run.output.assign(b.begin(), b.end());
      }
      if (r.contains("maps"))
        for (const auto& mv : r["maps"]) {
          const auto& b = mv["value"].get_binary();
          run.map_values.emplace_back(b.begin(), b.end());
          run.map_errors.push_back(mv.value("error", ""));
        }
      report.runs.push_back(std::move(run));
    }
  }
}

}  // namespace

LoadReport load_and_run(const std::string& object, const std::vector<PacketInput>& packets,
                        const LoaderConfig& cfg, const std::vector<MapWrite>& initial_maps) {
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
    // Nothing of the daemon's may be reachable from the program: a BPF
    // instruction can name any fd of the loading process (inline asm
    // "ld_pseudo r1, 1, FD" is a map-fd load), and the daemon holds the
    // model's and every session's KV maps. Keep only the report pipe, as fd 3.
    int report_fd = pipefd[1];
    if (report_fd != 3) {
      if (dup2(report_fd, 3) < 0) _exit(3);
      report_fd = 3;
    }
    if (syscall(SYS_close_range, 4u, ~0u, 0u) != 0) {
      for (int fd = 4; fd < 65536; ++fd) close(fd);
    }
    try {
      write_frame(report_fd, run_in_child(object, packets, cfg, initial_maps, report_fd));
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  close(pipefd[1]);
  bool timed_out = false;
  std::string data = read_until(pipefd[0], start + std::chrono::milliseconds(cfg.timeout_ms), &timed_out);
  report.timed_out = timed_out;
  close(pipefd[0]);
  int status = 0;
  if (report.timed_out) kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string last = last_frame(data);
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
    read_report(data, report);
  } catch (const std::exception& e) {
    report.finished = false;
    report.child_failure = std::string("cannot read the loader's report: ") + e.what();
  }
  return report;
}

}  // namespace qwen3::verify
