// Runs the experiments of kdrive_probe.bpf.c and prints their figures
// (docs/kernel-driver.md). Root only; pins threads to CPUs 0 and 1.
//   kdrive_probe calls N               bpf() round trip of an empty syscall program
//   kdrive_probe barrier ROUNDS        in-kernel spin barriers of two pinned runs vs WorkerPool::run
//   kdrive_probe chain TOKENS WORK BARRIERS [SLOTS [EVERY]]
//                                      bpf_wq chains (one per CPU), tokens read by epoll on a ring buffer
//                                      (a record every EVERY tokens and the last; default every token)
//   kdrive_probe hop N                 a bpf_wq chain alternating between callbacks of two programs
//   kdrive_probe fair SECONDS WORK     a CPU-bound thread's share of CPU 0 beside a chain on CPU 0
//   kdrive_probe long WORK             one uninterrupted syscall run of WORK units
//   kdrive_probe ops PRECISION         loads the engine's programs at the Qwen3-0.6B shape and lists what
//                                      the verifier processed per program (a driver program among them)
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "engine/bpf_programs.h"
#include "engine/model_plan.h"
#include "common/worker_pool.h"

namespace {

struct Args {
  uint32_t slot, parties;
  uint64_t tokens, work, barriers, rounds;
  uint64_t out_ns, out_spins, out_timeouts;
  int32_t status, cpu;
};
struct Event {
  uint32_t slot, cpu;
  uint64_t token, t_ns, run_ns;
};

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) std::fprintf(stderr, "cannot pin to CPU %d\n", cpu);
}

struct Probe {
  bpf_object* obj = nullptr;
  int fd(const char* prog) const { return bpf_program__fd(bpf_object__find_program_by_name(obj, prog)); }
  int map(const char* name) const { return bpf_map__fd(bpf_object__find_map_by_name(obj, name)); }
  int run(const char* prog, Args& a) const {
    LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &a, .ctx_size_in = sizeof a);  // a syscall program writes ctx back
    int err = bpf_prog_test_run_opts(fd(prog), &o);
    if (err) std::fprintf(stderr, "%s: %s\n", prog, strerror(-err));
    return err;
  }
  void reset_sync() const {
    int k = 0;
    uint64_t zero[2] = {0, 0};
    bpf_map_update_elem(map("syncs"), &k, zero, BPF_ANY);
  }
};

void calls(const Probe& p, int n) {
  pin(0);
  Args a{};
  a.work = 0;
  const uint64_t t0 = now_ns();
  for (int i = 0; i < n; i++) p.run("busy_run", a);
  std::printf("calls: %d empty syscall-program runs, %.2f us per bpf() call\n", n, (now_ns() - t0) / 1e3 / n);
}

void barrier(const Probe& p, uint64_t rounds) {
  p.reset_sync();
  Args a[2]{};
  std::atomic<int> ready{0};
  auto body = [&](int t) {
    pin(t);
    a[t].slot = uint32_t(t);
    a[t].parties = 2;
    a[t].rounds = rounds;
    ready++;
    while (ready.load() < 2) {
    }
    p.run("barrier_run", a[t]);
  };
  std::thread t1(body, 1);
  body(0);
  t1.join();
  for (int t = 0; t < 2; t++) {
    const double done = double(std::max<uint64_t>(a[t].rounds, 1));  // barriers passed before any timeout
    std::printf("kernel barrier, run on CPU %d: %llu of %llu passed, %.0f ns per barrier, %.1f spins each, %llu "
                "timeouts (the other run not in the kernel for 2^23 spins)\n",
                a[t].cpu, (unsigned long long)a[t].rounds, (unsigned long long)rounds, double(a[t].out_ns) / done,
                double(a[t].out_spins) / done, (unsigned long long)a[t].out_timeouts);
  }
  // The user-driven engine's boundary between operators: WorkerPool::run.
  pin(0);
  qwen3::WorkerPool pool(2);
  pool.run([](int t) { pin(t); });
  const uint64_t t0 = now_ns();
  for (uint64_t r = 0; r < rounds; r++) pool.run([](int) {});
  std::printf("user WorkerPool::run (2 workers, no work): %.0f ns per round\n", double(now_ns() - t0) / rounds);
}

struct Collected {
  std::vector<Event> ev;
  std::vector<uint64_t> lat;
};
int on_event(void* ctx, void* data, size_t) {
  auto* c = static_cast<Collected*>(ctx);
  const uint64_t t = now_ns();
  Event e;
  std::memcpy(&e, data, sizeof e);
  c->ev.push_back(e);
  c->lat.push_back(t > e.t_ns ? t - e.t_ns : 0);
  return 0;
}

// Starts one chain per slot (slot s queued from a thread on CPU s) and reads
// the tokens from the ring buffer by epoll until every chain finished.
Collected chain(const Probe& p, uint64_t tokens, uint64_t work, uint64_t barriers, int slots, bool quiet = false,
                uint64_t every = 1) {
  p.reset_sync();
  Collected c;
  ring_buffer* rb = ring_buffer__new(p.map("events"), on_event, &c, nullptr);
  const uint64_t t0 = now_ns();
  std::vector<std::thread> starters;
  int cpus[2] = {-1, -1};
  for (int s = 0; s < slots; s++)
    starters.emplace_back([&, s] {
      pin(s);
      Args a{};
      a.slot = uint32_t(s);
      a.tokens = tokens;
      a.work = work;
      a.barriers = barriers;
      a.rounds = every;
      p.run("chain_start", a);
      cpus[s] = a.cpu;
    });
  for (auto& t : starters) t.join();
  const uint64_t want = (every > 1 ? tokens / every + (tokens % every != 0) : tokens) * uint64_t(slots);
  uint64_t idle_polls = 0;
  while (c.ev.size() < want && idle_polls < 50) {
    const int n = ring_buffer__poll(rb, 200);
    idle_polls = n > 0 ? 0 : idle_polls + 1;
  }
  ring_buffer__free(rb);
  if (quiet) return c;
  std::vector<uint64_t> lat = c.lat;
  std::sort(lat.begin(), lat.end());
  uint64_t on_other = 0, max_run = 0, last_t = 0, done = 0;
  for (const Event& e : c.ev) {
    on_other += int(e.cpu) != cpus[e.slot & 1];
    max_run = std::max(max_run, e.run_ns);
    last_t = std::max(last_t, e.t_ns);
    done = std::max(done, e.token);
  }
  std::printf(
      "chain: %d slot(s) queued on CPU %d/%d, %zu of %llu records, %llu tokens per chain in %.1f ms (%.1f us per "
      "token per chain, start to last record), %llu ran off the queuing CPU, longest run %.2f ms, ring buffer to "
      "epoll reader: median %.1f us, max %.1f us\n",
      slots, cpus[0], cpus[1], c.ev.size(), (unsigned long long)want, (unsigned long long)done,
      (last_t - t0) / 1e6, (last_t - t0) / 1e3 / double(std::max<uint64_t>(done, 1)), (unsigned long long)on_other,
      max_run / 1e6,
      lat.empty() ? 0.0 : lat[lat.size() / 2] / 1e3, lat.empty() ? 0.0 : lat.back() / 1e3);
  return c;
}

// Iterations of a plain loop pinned to CPU 0 in `seconds`.
uint64_t spin_count(double seconds) {
  pin(0);
  volatile uint64_t n = 0;
  const uint64_t end = now_ns() + uint64_t(seconds * 1e9);
  while (now_ns() < end)
    for (int i = 0; i < 1000; i++) n = n + 1;
  return n;
}

void fair(const Probe& p, double seconds, uint64_t work) {
  const uint64_t alone = spin_count(seconds);
  // Tokens enough to outlast the measurement (a token of `work` units).
  Args a{};
  a.work = work;
  pin(0);
  p.run("busy_run", a);
  const double token_ms = a.out_ns / 1e6;
  const uint64_t tokens = uint64_t(seconds * 1000 / std::max(token_ms, 0.01) * 1.5) + 2;
  std::thread chain_thread([&] { chain(p, tokens, work, 0, 1, true); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const uint64_t beside = spin_count(seconds);
  chain_thread.join();
  std::printf("fair: one token = %.1f ms of kernel work; a CPU-bound thread on CPU 0 alone %.3g loops, beside the "
              "chain %.3g: %.0f%% of its alone rate\n",
              token_ms, double(alone), double(beside), 100.0 * double(beside) / double(alone));
}

// N hops between the callbacks of two programs (ping_arm's and pong_arm's).
void hop(const Probe& p, uint64_t n) {
  pin(0);
  Args a{};
  if (p.run("pong_arm", a) || a.status) {
    std::fprintf(stderr, "pong_arm: status %d\n", a.status);
    return;
  }
  a.tokens = n;
  if (p.run("ping_arm", a) || a.status) {
    std::fprintf(stderr, "ping_arm: status %d\n", a.status);
    return;
  }
  struct Hop {
    uint64_t left, hops, t0, t1;
  } h{};
  const int k = 0;
  for (int i = 0; i < 500 && (h.hops <= n); i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    bpf_map_lookup_elem(p.map("hops"), &k, &h);
  }
  std::printf("hop: %llu hops between two programs' callbacks in %.2f ms: %.2f us per hop\n",
              (unsigned long long)h.hops, (h.t1 - h.t0) / 1e6, (h.t1 - h.t0) / 1e3 / double(std::max<uint64_t>(h.hops, 1)));
}

void long_run(const Probe& p, uint64_t work) {
  pin(0);
  Args a{};
  a.work = work;
  p.run("busy_run", a);
  std::printf("long: %llu units in one uninterrupted run on CPU %d: %.1f ms\n", (unsigned long long)work, a.cpu,
              a.out_ns / 1e6);
}

// The engine's programs at the 0.6B shape (no weights: the verifier needs
// only the shape), and what the verifier processed for each.
void ops(const std::string& precision) {
  qwen3::ModelConfig c;
  c.hidden_size = 1024;
  c.num_hidden_layers = 28;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.intermediate_size = 3072;
  c.vocab_size = 151936;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1e6;
  c.tie_word_embeddings = true;
  const auto prec = precision == "q24" ? qwen3::Precision::q24 : qwen3::Precision::q8;
  qwen3::engine::ModelPlan plan = qwen3::engine::make_model_plan(c, prec, false, 2, 4096, 8);
  plan.layout.weight_entries = 1;
  timespec boot;
  clock_gettime(CLOCK_BOOTTIME, &boot);  // bpf_prog_info::load_time's clock: list only what we load
  const uint64_t boot0 = uint64_t(boot.tv_sec) * 1000000000ull + uint64_t(boot.tv_nsec);
  const uint64_t t0 = now_ns();
  qwen3::engine::BpfPrograms progs(plan.layout);
  std::printf("ops (%s, 0.6B shape): loaded and verified in %.1f s\n", precision.c_str(), (now_ns() - t0) / 1e9);
  uint32_t id = 0;
  while (bpf_prog_get_next_id(id, &id) == 0) {
    const int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0) continue;
    bpf_prog_info info{};
    uint32_t len = sizeof info;
    if (bpf_prog_get_info_by_fd(fd, &info, &len) == 0 && std::strncmp(info.name, "qn_", 3) == 0 &&
        info.load_time >= boot0)
      std::printf("  %-16s %8u instructions processed, %6u xlated bytes, %7u jited bytes\n", info.name,
                  info.verified_insns, info.xlated_prog_len, info.jited_prog_len);
    close(fd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: kdrive_probe calls N | barrier ROUNDS | chain TOKENS WORK BARRIERS [SLOTS] | "
                         "hop N | fair SECONDS WORK | long WORK | ops q8|q24\n");
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "ops") {
    ops(argv[2]);
    return 0;
  }
  Probe p;
  p.obj = bpf_object__open_file(KDRIVE_PROBE_OBJ, nullptr);
  if (!p.obj || bpf_object__load(p.obj)) {
    std::fprintf(stderr, "cannot load %s\n", KDRIVE_PROBE_OBJ);
    return 1;
  }
  auto num = [&](int i, uint64_t d) { return i < argc ? std::strtoull(argv[i], nullptr, 0) : d; };
  if (mode == "calls") calls(p, int(num(2, 10000)));
  else if (mode == "barrier") barrier(p, num(2, 100000));
  else if (mode == "chain")
    chain(p, num(2, 16), num(3, 1000000), num(4, 0), int(std::min<uint64_t>(num(5, 2), 2)), false, num(6, 1));
  else if (mode == "fair") fair(p, std::strtod(argv[2], nullptr), num(3, 4000000));
  else if (mode == "hop") hop(p, num(2, 10000));
  else if (mode == "long") long_run(p, num(2, 1000000));
  else return 2;
  bpf_object__close(p.obj);
  return 0;
}
