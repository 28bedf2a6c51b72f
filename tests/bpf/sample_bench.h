// What the qn_sample benches (sample_bench, sample_pass_bench) share: the
// program at the Qwen3 vocabulary (sample_programs.h: a one-layer model, no
// weights read), a repetition-penalty history of random ids, and this
// thread's CPU clock (BPF_PROG_TEST_RUN runs the program in the caller's
// context, so other processes on a busy host do not count).
#pragma once

#include <time.h>

#include <cstdint>
#include <random>
#include <vector>

#include "sample_programs.h"

namespace qwen3::engine {

// This thread's CPU time (user + kernel), in microseconds.
inline double thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

// 200 ids drawn uniformly from the vocabulary.
inline std::vector<int32_t> random_history(std::mt19937_64& rng, uint32_t vocab) {
  std::vector<int32_t> history;
  for (int i = 0; i < 200; i++) history.push_back(int32_t(rng() % vocab));
  return history;
}

}  // namespace qwen3::engine
