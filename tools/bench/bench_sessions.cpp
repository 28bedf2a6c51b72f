// --sessions N --driver user|kernel|both: N sessions generating at once
// through the daemon's scheduler (daemon/scheduler), as the daemon runs them:
// user-driven sessions share batched passes (one Scheduler::run per token),
// kernel-driven ones take turns of a few tokens each
// (Scheduler::generate_in_kernel). Greedy; each session's prompt prefilled
// untimed, then --decode tokens timed from the first step to the last
// session's end. The drivers and counts alternate round by round in one
// process; CPU is this process's plus, for the kernel driver, the chains'
// run time in the kworkers (busy_ms).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "bench_run.h"
#include "common/error.h"
#include "sampling/sampler.h"
#include "scheduler/scheduler.h"

namespace qwen3::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Session i's prompt: the bench's prompt for session 0, its own ids for the others.
std::vector<int32_t> session_prompt(const std::vector<int32_t>& prompt, int i, int vocab) {
  if (i == 0) return prompt;
  std::mt19937_64 rng(1000 + i);
  std::vector<int32_t> p(prompt.size());
  for (auto& t : p) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return p;
}

// One session's decode: the last prompt token fed, n tokens chosen.
std::vector<int32_t> decode_user(Scheduler& sched, Backend& b, KvCache& kv, std::vector<int32_t> history, int n) {
  Sampler sampler(SamplingParams{}, &b);
  const size_t start = history.size();
  while (static_cast<int>(history.size() - start) < n) {
    const int32_t feed[1] = {history.back()};
    const ForwardResult r = sched.run(kv, feed, sampler.wants());
    history.push_back(sampler.sample(r.positions.back(), history));
  }
  return {history.begin() + static_cast<long>(start), history.end()};
}

std::vector<int32_t> decode_kernel(Scheduler& sched, Backend& b, KvCache& kv, const std::vector<int32_t>& history,
                                   int n, double& busy_ms) {
  Sampler sampler(SamplingParams{}, &b);
  KernelGenerateRequest req;
  req.feed = std::span<const int32_t>(&history.back(), 1);
  req.history = history;
  req.wants = sampler.wants();
  req.max_tokens = n;
  auto r = sched.generate_in_kernel(kv, req, [](int32_t, int) { return true; });
  if (!r) throw Error("the kernel driver declined the bench's request (was it loaded?)");
  busy_ms = r->busy_ms;
  return r->tokens;
}

struct SessionsSample {
  double tps = 0, cpu_ms = 0;
  std::vector<std::vector<int32_t>> ids;  // per session
};

SessionsSample run_sessions(Scheduler& sched, Backend& b, const std::string& driver, int count,
                    const std::vector<int32_t>& prompt, int decode) {
  const int vocab = b.config().vocab_size;
  std::vector<std::unique_ptr<KvCache>> kvs;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < count; i++) {
    prompts.push_back(session_prompt(prompt, i, vocab));
    kvs.push_back(b.create_kv(static_cast<int>(prompt.size()) + decode + 1));
    b.forward(*kvs.back(), std::span<const int32_t>(prompts.back()).first(prompt.size() - 1), {});  // untimed
  }
  SessionsSample s;
  s.ids.resize(count);
  std::vector<double> busy(count, 0);
  const double cpu0 = process_cpu_seconds();
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < count; i++)
    threads.emplace_back([&, i] {
      s.ids[i] = driver == "kernel" ? decode_kernel(sched, b, *kvs[i], prompts[i], decode, busy[i])
                                    : decode_user(sched, b, *kvs[i], prompts[i], decode);
    });
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  double busy_all = 0;
  for (double x : busy) busy_all += x;
  const double tokens = double(count) * decode;
  s.tps = tokens / wall;
  s.cpu_ms = ((process_cpu_seconds() - cpu0) * 1000.0 + busy_all) / tokens;
  return s;
}

}  // namespace

void time_driver_sessions(Backend& b, const Options& o, const std::vector<int32_t>& prompt, Run& r) {
  if (prompt.size() < 2) throw Error("--sessions with --driver needs a prompt of at least 2 tokens");
  std::vector<int> counts{1};
  for (int n : o.sessions)
    if (std::find(counts.begin(), counts.end(), n) == counts.end()) counts.push_back(n);
  Scheduler sched(b);
  std::vector<Run::DriverSessions> figs;
  for (int n : counts)
    for (const auto& d : o.drivers) {
      Run::DriverSessions f;
      f.driver = d;
      f.n = n;
      figs.push_back(f);
    }
  std::vector<std::vector<std::vector<int32_t>>> ids(figs.size());
  for (int round = 0; round < o.rounds; round++)
    for (size_t k = 0; k < figs.size(); k++) {
      auto& f = figs[(k + size_t(round)) % figs.size()];  // alternate who goes first
      const SessionsSample s = run_sessions(sched, b, f.driver, f.n, prompt, o.decode);
      f.tps.push_back(s.tps);
      f.cpu_ms.push_back(s.cpu_ms);
      auto& known = ids[&f - figs.data()];
      if (known.empty()) known = s.ids;
      else if (known != s.ids) r.driver_sessions_identical = false;
      if (!o.json)
        std::fprintf(stderr, "sessions %d driver %s round %d: %.2f tokens/s, %.1f CPU ms/token\n", f.n,
                     f.driver.c_str(), round, s.tps, s.cpu_ms);
    }
  for (size_t k = 0; k < figs.size(); k++) {
    auto& f = figs[k];
    f.best_tps = *std::max_element(f.tps.begin(), f.tps.end());
    f.median_tps = median(f.tps);
    f.median_cpu_ms = median(f.cpu_ms);
    for (size_t u = 0; u < figs.size(); u++)
      if (figs[u].n == f.n && figs[u].driver == "user") {
        f.ratio_vs_user = median_ratio(f.tps, figs[u].tps);
        if (ids[u] != ids[k]) r.driver_sessions_identical = false;
      }
  }
  r.driver_sessions = std::move(figs);
}

}  // namespace qwen3::bench
