// Not a test: the cost of one qn_sample call (the sampling probabilities in
// the kernel) against the float Sampler, at the Qwen3 vocabulary:
//   the kernel's top-20 list (Qwen3's defaults), the whole vocabulary with
//   top-p, and with a penalty and a top-k cut over the whole vocabulary;
//   logits random normal (sigma 3: a flat-ish random model; sigma 8: peaked).
// Usage: bpf_sample_bench [repeats for the full-vocabulary cases, default 20]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <vector>

#include "engine/sampling_kernel.h"
#include "sample_bench.h"
#include "sampling/kernel_params.h"
#include "sampling/sampler.h"

using namespace qwen3;
using namespace qwen3::engine;

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, atoi(argv[1])) : 20;
  BpfPrograms& progs = programs(kQwenVocab);
  for (auto& st : progs.stats())
    if (st.name == "qn_sample") std::printf("qn_sample: %u instructions processed by the verifier\n", st.verified_insns);
  std::mt19937_64 rng(1);
  const std::vector<int32_t> history = random_history(rng, kQwenVocab);

  auto time = [&](const char* what, const PositionLogits& s, const SamplingParams& p, int n) {
    Sampler flt(p);
    std::mutex mu;
    size_t kept = 0;
    const uint64_t c0 = progs.calls();
    auto t0 = thread_cpu_us();
    for (int i = 0; i < n; i++) {
      std::lock_guard lock(mu);  // what the backend holds around each call (its engine lock)
      kept = kernel_distribution(progs, s, kernel_params(p), history)->tokens.size();
    }
    const double kernel_us = (thread_cpu_us() - t0) / n;
    const uint64_t calls = progs.calls() - c0;
    t0 = thread_cpu_us();
    for (int i = 0; i < n; i++) kept += 0 * flt.distribution(s, history).tokens.size();
    const double float_us = (thread_cpu_us() - t0) / n;
    t0 = thread_cpu_us();
    for (int i = 0; i < n; i++) progs.sample();  // the program alone, on the input already in place
    const double prog_us = (thread_cpu_us() - t0) / n;
    std::printf("%-48s kept %6zu  kernel path %8.1f us (program %8.1f, %.0f bpf() per call)  float %8.1f us (CPU)\n", what,
                kept, kernel_us, prog_us, double(calls) / n, float_us);
  };

  PositionLogits topk;
  {
    std::normal_distribution<double> g(0, 1);
    std::vector<float> l(20);
    for (auto& v : l) v = float(std::lround(g(rng) * 65536.0) / 65536.0);
    std::sort(l.begin(), l.end(), std::greater<float>());
    for (int i = 0; i < 20; i++) topk.top_k.push_back({int32_t(rng() % 151936), l[i]});
  }
  time("top-20 list, T 0.6 top_p 0.95", topk, {.temperature = 0.6f, .top_k = 20, .top_p = 0.95f}, 2000);
  for (double sigma : {3.0, 8.0}) {
    PositionLogits full;
    std::normal_distribution<double> g(0, sigma);
    full.full.resize(151936);
    for (auto& v : full.full) v = float(std::lround(g(rng) * 65536.0) / 65536.0);
    char name[80];
    std::snprintf(name, sizeof name, "vocabulary (sigma %g), T 1 top_p 0.9", sigma);
    time(name, full, {.temperature = 1.0f, .top_p = 0.9f}, reps);
    std::snprintf(name, sizeof name, "vocabulary (sigma %g), T 0.6 k 20 p 0.95 pen 1.1", sigma);
    time(name, full, {.temperature = 0.6f, .top_k = 20, .top_p = 0.95f, .repetition_penalty = 1.1f}, reps);
    std::snprintf(name, sizeof name, "vocabulary (sigma %g), T 1, nothing cut", sigma);
    time(name, full, {.temperature = 1.0f}, reps);
  }
  std::mutex mu;
  auto t0 = thread_cpu_us();
  for (int i = 0; i < 1000000; i++) {
    std::lock_guard lock(mu);
    asm volatile("" ::: "memory");
  }
  std::printf("uncontended mutex lock + unlock: %.1f ns\n",
              (thread_cpu_us() - t0) * 1e3 / 1e6);
  return 0;
}
