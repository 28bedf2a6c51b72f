// Not a test: what reading the logits where the pass left them saves per
// position, at the Qwen3 vocabulary (151,936), the rest of the forward pass
// left out. With one position's Q16 logits in logits_buf (row 0, random
// normal, sigma 3), in alternated rounds:
//   draw, copied:   what the user driver did: the row copied out as the Q16
//                   and float scores (BpfBackend::collect with full logits:
//                   full_q16, full), then kernel_sample_token, which writes
//                   them back into sample_buf (load_candidates) and runs
//                   qn_sample (also each speculative draft position's draw);
//   draw, in place: kernel_sample_row: qn_sample reads the row in the kernel
//                   (in the pass, a draft position's too);
//   lse, copied:    the logprobs' normalizer over scores that carry full_q16
//                   (written back into sample_buf);
//   lse, in place:  the same over the row (QN_SAMPLE_LSE | QN_SAMPLE_LOGITS);
//   copy out:       collect's copy alone, which a speculative pass paid for
//                   every position, drawn or not.
// Both ways give the same token and normalizer (checked every round). Times
// are this thread's CPU time (BPF_PROG_TEST_RUN runs the program in the
// caller's context) and wall time per position; best and median over the rounds.
// Usage: bpf_sample_pass_bench [rounds, default 9] [positions per round, default 30]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "engine/sampling_kernel.h"
#include "sample_bench.h"
#include "sampling/kernel_params.h"

using namespace qwen3;
using namespace qwen3::engine;

namespace {

double wall_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Stat {
  std::vector<double> cpu, wall;
  void print(const char* what) {
    std::sort(cpu.begin(), cpu.end());
    std::sort(wall.begin(), wall.end());
    std::printf("%-15s CPU us/position best %8.1f median %8.1f   wall best %8.1f median %8.1f\n", what, cpu.front(),
                cpu[cpu.size() / 2], wall.front(), wall[wall.size() / 2]);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, atoi(argv[1])) : 9;
  const int tokens = argc > 2 ? std::max(1, atoi(argv[2])) : 30;
  BpfPrograms& progs = programs(kQwenVocab);
  const uint32_t vocab = progs.layout().shape.vocab;
  std::mt19937_64 rng(1);
  std::normal_distribution<double> g(0, 3);
  int32_t* row = progs.logits();
  for (uint32_t i = 0; i < vocab; i++) row[i] = int32_t(std::lround(g(rng) * 65536.0));
  const std::vector<int32_t> history = random_history(rng, vocab);
  // Qwen3's generation defaults with the shipped model's penalty: the whole vocabulary is sampled.
  const KernelSamplingParams p =
      kernel_params({.temperature = 0.7f, .top_p = 0.9f, .repetition_penalty = 1.1f, .seed = 5});
  std::printf("vocabulary %u, %d rounds of %d tokens, T 0.7 top_p 0.9 penalty 1.1\n", vocab, rounds, tokens);

  // The scores collect() built with full logits: the copy out.
  auto copy_out = [&] {
    PositionLogits pl;
    pl.full_q16.assign(row, row + vocab);
    pl.full.resize(vocab);
    for (uint32_t i = 0; i < vocab; i++) pl.full[i] = row[i] / 65536.0f;
    return pl;
  };
  const PositionLogits held = copy_out();
  enum { draw_copied, draw_in_place, lse_copied, lse_in_place, out_only, kinds };
  const char* names[kinds] = {"draw, copied", "draw, in place", "lse, copied", "lse, in place", "copy out"};
  Stat stat[kinds];
  uint64_t draw = 0;
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < kinds; k++) {
      const int kind = (r + k) % kinds;  // the order rotated every round
      const double c0 = thread_cpu_us(), w0 = wall_us();
      for (int t = 0; t < tokens; t++) {
        const uint64_t index = draw + uint64_t(t);
        switch (kind) {
          case draw_copied: (void)kernel_sample_token(progs, copy_out(), p, history, index); break;
          case draw_in_place: (void)kernel_sample_row(progs, 0, p, history, index); break;
          case lse_copied: (void)kernel_log_normalizer(progs, held); break;
          case lse_in_place: (void)kernel_log_normalizer(progs, held, 0u); break;
          case out_only: (void)copy_out(); break;
        }
      }
      stat[kind].cpu.push_back((thread_cpu_us() - c0) / tokens);
      stat[kind].wall.push_back((wall_us() - w0) / tokens);
    }
    // The same tokens and normalizer both ways (the draw indexes of this round once more).
    if (kernel_log_normalizer(progs, held) != kernel_log_normalizer(progs, held, 0u)) {
      std::fprintf(stderr, "the normalizer differs in place\n");
      return 1;
    }
    for (int t = 0; t < tokens; t++) {
      const auto a = kernel_sample_token(progs, held, p, history, draw + uint64_t(t));
      const auto b = kernel_sample_row(progs, 0, p, history, draw + uint64_t(t));
      if (a != b) {
        std::fprintf(stderr, "draw %llu: copied %d, in place %d\n", (unsigned long long)(draw + t), a.value_or(-1),
                     b.value_or(-1));
        return 1;
      }
    }
    draw += uint64_t(tokens);
  }
  for (int k = 0; k < kinds; k++) stat[k].print(names[k]);
  return 0;
}
