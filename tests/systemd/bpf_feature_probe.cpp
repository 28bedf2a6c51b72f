// qwen3-bpf-feature-probe: exercises, with raw bpf() calls, each kernel BPF
// feature qwen3-bpfd relies on, and says which ones work in the current
// sandbox (capabilities, seccomp filter, namespaces). The systemd container
// test runs it under the service unit's hardening to show bpf() keeps
// working there, and to find out which capabilities each feature needs.
//
// Output: one line per feature, "ok <feature>" or "FAIL <feature>: <errno text>".
// Exit status: 0 if every selected feature works, 1 otherwise, 2 on usage errors.
#include <linux/bpf.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

// Newer than the bookworm uapi header this may be built against.
constexpr uint32_t kMapTypeArena = 33;

long sys_bpf(int cmd, bpf_attr& attr) {
  return syscall(__NR_bpf, cmd, &attr, sizeof(attr));
}

// Minimal instruction encoders (the probe programs are a handful of insns).
bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst;
  i.src_reg = src;
  i.off = off;
  i.imm = imm;
  return i;
}
bpf_insn mov64_imm(uint8_t dst, int32_t imm) { return insn(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm); }
bpf_insn mov64_reg(uint8_t dst, uint8_t src) { return insn(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0); }
bpf_insn add64_imm(uint8_t dst, int32_t imm) { return insn(BPF_ALU64 | BPF_ADD | BPF_K, dst, 0, 0, imm); }
bpf_insn st_mem_w(uint8_t dst, int16_t off, int32_t imm) { return insn(BPF_ST | BPF_MEM | BPF_W, dst, 0, off, imm); }
bpf_insn st_mem_dw(uint8_t dst, int16_t off, int32_t imm) { return insn(BPF_ST | BPF_MEM | BPF_DW, dst, 0, off, imm); }
bpf_insn jeq_imm(uint8_t dst, int32_t imm, int16_t off) { return insn(BPF_JMP | BPF_JEQ | BPF_K, dst, 0, off, imm); }
bpf_insn call(int32_t helper) { return insn(BPF_JMP | BPF_CALL, 0, 0, 0, helper); }
bpf_insn exit_insn() { return insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }
// ld_imm64 of a map fd takes two instruction slots.
void ld_map_fd(std::vector<bpf_insn>& prog, uint8_t dst, int fd) {
  prog.push_back(insn(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, fd));
  prog.push_back(insn(0, 0, 0, 0, 0));
}

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { if (fd >= 0) close(fd); }
};

// Throws the errno text of a failed step; a feature "works" if nothing throws.
struct StepError { std::string what; };
[[noreturn]] void fail(const std::string& step) {
  throw StepError{step + ": " + std::strerror(errno)};
}

int map_create(uint32_t type, uint32_t key_size, uint32_t value_size, uint32_t max_entries,
               uint32_t flags = 0, int inner_fd = 0, uint64_t extra = 0) {
  bpf_attr a{};
  a.map_type = type;
  a.key_size = key_size;
  a.value_size = value_size;
  a.max_entries = max_entries;
  a.map_flags = flags;
  a.inner_map_fd = inner_fd;
  a.map_extra = extra;
  int fd = static_cast<int>(sys_bpf(BPF_MAP_CREATE, a));
  if (fd < 0) fail("BPF_MAP_CREATE type " + std::to_string(type));
  return fd;
}

int prog_load(uint32_t type, const std::vector<bpf_insn>& prog, uint32_t flags, std::string* log_out) {
  static char log[65536];
  log[0] = 0;
  bpf_attr a{};
  a.prog_type = type;
  a.insns = reinterpret_cast<uint64_t>(prog.data());
  a.insn_cnt = static_cast<uint32_t>(prog.size());
  a.license = reinterpret_cast<uint64_t>("GPL");
  a.prog_flags = flags;
  a.log_buf = reinterpret_cast<uint64_t>(log);
  a.log_size = sizeof(log);
  a.log_level = 1;
  int fd = static_cast<int>(sys_bpf(BPF_PROG_LOAD, a));
  if (fd < 0) {
    int saved = errno;
    if (log_out) *log_out = log;
    errno = saved;
    fail("BPF_PROG_LOAD type " + std::to_string(type));
  }
  return fd;
}

void probe_array_map() {
  Fd map(map_create(BPF_MAP_TYPE_ARRAY, 4, 8, 4));
  uint32_t key = 1;
  uint64_t value = 7;
  bpf_attr a{};
  a.map_fd = map.fd;
  a.key = reinterpret_cast<uint64_t>(&key);
  a.value = reinterpret_cast<uint64_t>(&value);
  if (sys_bpf(BPF_MAP_UPDATE_ELEM, a) < 0) fail("BPF_MAP_UPDATE_ELEM");
}

// A sleepable BPF_PROG_TYPE_SYSCALL program writes 42 into an mmapable array
// through bpf_map_lookup_elem; BPF_PROG_TEST_RUN runs it; user space reads the
// value back through the mapping (the daemon's operator pattern).
void probe_syscall_prog_mmap_map() {
  Fd map(map_create(BPF_MAP_TYPE_ARRAY, 4, 8, 1, BPF_F_MMAPABLE));
  long page = sysconf(_SC_PAGESIZE);
  void* mem = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, map.fd, 0);
  if (mem == MAP_FAILED) fail("mmap of BPF_F_MMAPABLE array");
  std::vector<bpf_insn> p;
  p.push_back(st_mem_w(10, -4, 0));        // key = 0 on the stack
  ld_map_fd(p, 1, map.fd);                 // r1 = map
  p.push_back(mov64_reg(2, 10));
  p.push_back(add64_imm(2, -4));           // r2 = &key
  p.push_back(call(BPF_FUNC_map_lookup_elem));
  p.push_back(jeq_imm(0, 0, 1));           // if (!value) skip the store
  p.push_back(st_mem_dw(0, 0, 42));
  p.push_back(mov64_imm(0, 0));
  p.push_back(exit_insn());
  std::string log;
  Fd prog;
  try {
    prog.fd = prog_load(BPF_PROG_TYPE_SYSCALL, p, BPF_F_SLEEPABLE, &log);
  } catch (StepError& e) {
    munmap(mem, page);
    if (!log.empty()) e.what += " (verifier: " + log.substr(0, 300) + ")";
    throw;
  }
  bpf_attr a{};
  a.test.prog_fd = prog.fd;
  long rc = sys_bpf(BPF_PROG_TEST_RUN, a);
  uint64_t got = *static_cast<volatile uint64_t*>(mem);
  munmap(mem, page);
  if (rc < 0) fail("BPF_PROG_TEST_RUN of a syscall program");
  if (got != 42) {
    errno = EIO;
    fail("syscall program ran but the mapped value is " + std::to_string(got));
  }
}

void probe_arena() {
  long page = sysconf(_SC_PAGESIZE);
  Fd arena(map_create(kMapTypeArena, 0, 0, 16, BPF_F_MMAPABLE));
  void* mem = mmap(nullptr, 16 * page, PROT_READ | PROT_WRITE, MAP_SHARED, arena.fd, 0);
  if (mem == MAP_FAILED) fail("mmap of the arena");
  static_cast<volatile char*>(mem)[0] = 1;  // faults a page in
  munmap(mem, 16 * page);
}

void probe_map_in_map() {
  Fd inner(map_create(BPF_MAP_TYPE_ARRAY, 4, 8, 4));
  Fd outer(map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, 4, 4, 2, 0, inner.fd));
  Fd other(map_create(BPF_MAP_TYPE_ARRAY, 4, 8, 4));
  uint32_t key = 1;
  uint32_t value = static_cast<uint32_t>(other.fd);
  bpf_attr a{};
  a.map_fd = outer.fd;
  a.key = reinterpret_cast<uint64_t>(&key);
  a.value = reinterpret_cast<uint64_t>(&value);
  if (sys_bpf(BPF_MAP_UPDATE_ELEM, a) < 0) fail("BPF_MAP_UPDATE_ELEM of array-of-maps");
}

// The XDP verify pipeline: load an XDP program without attaching it and run a
// fixture packet through BPF_PROG_TEST_RUN.
void probe_xdp_test_run() {
  std::vector<bpf_insn> p{mov64_imm(0, XDP_PASS), exit_insn()};
  std::string log;
  Fd prog(prog_load(BPF_PROG_TYPE_XDP, p, 0, &log));
  unsigned char packet[64] = {0};
  bpf_attr a{};
  a.test.prog_fd = prog.fd;
  a.test.data_in = reinterpret_cast<uint64_t>(packet);
  a.test.data_size_in = sizeof(packet);
  if (sys_bpf(BPF_PROG_TEST_RUN, a) < 0) fail("BPF_PROG_TEST_RUN of an XDP program");
  if (a.test.retval != XDP_PASS) {
    errno = EIO;
    fail("XDP program returned " + std::to_string(a.test.retval));
  }
}

// Reading program info by id (what bpftool does) needs CAP_SYS_ADMIN; the
// daemon does not need it, this line documents the boundary.
void probe_prog_get_next_id() {
  bpf_attr a{};
  a.start_id = 0;
  if (sys_bpf(BPF_PROG_GET_NEXT_ID, a) < 0 && errno != ENOENT) fail("BPF_PROG_GET_NEXT_ID");
}

// The XDP verify pipeline's compiler sandbox adds Landlock when the kernel
// offers it; a seccomp filter that does not list the landlock_* calls hides it.
void probe_landlock() {
  constexpr long kLandlockCreateRuleset = 444;  // same number on every architecture
  constexpr unsigned kCreateRulesetVersion = 1U << 0;
  long abi = syscall(kLandlockCreateRuleset, nullptr, 0, kCreateRulesetVersion);
  if (abi < 1) fail("landlock_create_ruleset(LANDLOCK_CREATE_RULESET_VERSION)");
}

struct Feature {
  const char* name;
  std::function<void()> run;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<Feature> features{
      {"array_map", probe_array_map},
      {"syscall_prog_test_run_mmapable_map", probe_syscall_prog_mmap_map},
      {"arena_map", probe_arena},
      {"map_in_map", probe_map_in_map},
      {"xdp_prog_test_run", probe_xdp_test_run},
      {"prog_get_next_id", probe_prog_get_next_id},
      {"landlock", probe_landlock},
  };
  std::vector<std::string> wanted(argv + 1, argv + argc);
  if (!wanted.empty() && (wanted[0] == "-h" || wanted[0] == "--help")) {
    std::printf("usage: %s [FEATURE...]\nfeatures:", argv[0]);
    for (auto& f : features) std::printf(" %s", f.name);
    std::printf("\n");
    return 0;
  }
  for (auto& w : wanted) {
    bool known = false;
    for (auto& f : features) known |= (w == f.name);
    if (!known) {
      std::fprintf(stderr, "unknown feature '%s' (see --help)\n", w.c_str());
      return 2;
    }
  }
  int failures = 0;
  for (auto& f : features) {
    if (!wanted.empty()) {
      bool selected = false;
      for (auto& w : wanted) selected |= (w == f.name);
      if (!selected) continue;
    }
    try {
      f.run();
      std::printf("ok %s\n", f.name);
    } catch (const StepError& e) {
      std::printf("FAIL %s: %s\n", f.name, e.what.c_str());
      ++failures;
    }
  }
  std::fflush(stdout);
  return failures ? 1 : 0;
}
