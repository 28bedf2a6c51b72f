// --driver: the same greedy generation steered by the engine's threads (user)
// and by the kernel on its own (kernel; docs/kernel-driver.md), alternated
// round by round in one process: ms per decoded token (wall), CPU per token
// (this process, plus for the kernel driver the chain's own run time in the
// kworkers, which no process is charged for), bpf() calls per decoded token,
// and whether the ids agree.

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "bench_run.h"
#include "common/error.h"
#include "sampling/sampler.h"

namespace qwen3::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Sample {
  double ms = 0, cpu_ms = 0, calls = 0, max_link_ms = 0;
  double second_share = 0;  // kernel: the shares the second CPU's chain ran
  std::vector<int32_t> ids;
};

// Decode-phase figures: from the first token to the last, per token.
Sample run_user(Backend& b, BpfBackendApi& api, const std::vector<int32_t>& prompt, int n) {
  Sampler sampler(SamplingParams{}, &b);
  const ForwardWants wants = sampler.wants();
  auto kv = b.create_kv(static_cast<int>(prompt.size()) + n + 1);
  std::vector<int32_t> history = prompt;
  Sample s;
  ForwardResult r = b.forward(*kv, prompt, wants);
  history.push_back(sampler.sample(r.positions.back(), history));
  const uint64_t c0 = api.stats().bpf_calls;
  const double cpu0 = process_cpu_seconds();
  const auto t0 = Clock::now();
  while (static_cast<int>(history.size() - prompt.size()) < n) {
    r = b.forward(*kv, std::span<const int32_t>(&history.back(), 1), wants);
    history.push_back(sampler.sample(r.positions.back(), history));
  }
  const int steps = n - 1;
  s.ms = seconds_between(t0, Clock::now()) * 1000.0 / steps;
  s.cpu_ms = (process_cpu_seconds() - cpu0) * 1000.0 / steps;
  s.calls = double(api.stats().bpf_calls - c0) / steps;
  s.ids.assign(history.begin() + static_cast<long>(prompt.size()), history.end());
  return s;
}

// The whole generation is one submission; its bpf() calls are counted over
// all n tokens (prefill included), the time from the first token to the last.
Sample run_kernel(Backend& b, BpfBackendApi& api, const std::vector<int32_t>& prompt, int n) {
  Sampler sampler(SamplingParams{}, &b);
  KernelGenerateRequest req;
  req.feed = prompt;
  req.history = prompt;
  req.wants = sampler.wants();
  req.max_tokens = n;
  auto kv = b.create_kv(static_cast<int>(prompt.size()) + n + 1);
  Sample s;
  const uint64_t c0 = api.stats().bpf_calls;
  Clock::time_point first;
  double cpu_first = 0;
  auto res = b.generate_in_kernel(*kv, req, [&](int32_t, int index) {
    if (index == 0) {
      first = Clock::now();
      cpu_first = process_cpu_seconds();
    }
    return true;
  });
  const auto end = Clock::now();
  if (!res) throw Error("the kernel driver declined the bench's request");
  const int steps = n - 1;
  s.ms = seconds_between(first, end) * 1000.0 / steps;
  // The chain's run time is the kworkers' CPU: added to this process's. Its
  // prefill share is left in (the busy time is not split by token): an
  // overestimate of the decode CPU by the prompt's passes.
  s.cpu_ms = ((process_cpu_seconds() - cpu_first) * 1000.0 + res->busy_ms) / steps;
  s.calls = double(api.stats().bpf_calls - c0) / n;
  s.max_link_ms = res->max_link_ms;
  uint64_t all = 0;
  for (uint64_t c : res->chain_links) all += c;
  s.second_share = all && res->chain_links.size() > 1 ? double(all - res->chain_links[0]) / double(all) : 0;
  s.ids = res->tokens;
  return s;
}

}  // namespace

void time_drivers(Backend& b, const Options& o, const std::vector<int32_t>& prompt, Run& r) {
  auto& api = dynamic_cast<BpfBackendApi&>(b);
  const int n = std::max(o.decode, 2);
  std::vector<Run::Driver> figs(o.drivers.size());
  for (size_t d = 0; d < o.drivers.size(); d++) figs[d].name = o.drivers[d];
  for (int round = 0; round < o.rounds; round++) {
    for (size_t k = 0; k < figs.size(); k++) {
      const size_t d = (k + size_t(round)) % figs.size();  // alternate who goes first
      const Sample s = figs[d].name == "kernel" ? run_kernel(b, api, prompt, n) : run_user(b, api, prompt, n);
      figs[d].ms.push_back(s.ms);
      figs[d].cpu_ms.push_back(s.cpu_ms);
      figs[d].calls_per_token = s.calls;
      figs[d].max_link_ms = std::max(figs[d].max_link_ms, s.max_link_ms);
      figs[d].second_chain_share.push_back(s.second_share);
      if (figs[d].generated.empty()) figs[d].generated = s.ids;
      else if (figs[d].generated != s.ids) figs[d].stable = false;
    }
  }
  for (auto& f : figs) {
    f.best_ms = *std::min_element(f.ms.begin(), f.ms.end());
    f.median_ms = median(f.ms);
    f.median_cpu_ms = median(f.cpu_ms);
    if (!o.json)
      std::fprintf(stderr, "driver %s: %.2f ms/token best, %.2f median, %.2f CPU ms/token, %.3f bpf()/token\n",
                   f.name.c_str(), f.best_ms, f.median_ms, f.median_cpu_ms, f.calls_per_token);
  }
  r.drivers_identical = true;
  for (auto& f : figs) r.drivers_identical = r.drivers_identical && f.stable && f.generated == figs[0].generated;
  r.drivers = std::move(figs);
}

}  // namespace qwen3::bench
