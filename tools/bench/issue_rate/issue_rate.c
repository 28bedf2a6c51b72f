/* qwen3-bpf-issue-rate: how many 64-bit multiplies, adds and xors one core
 * of this host retires per second, 12 independent chains of each (x86-64
 * asm, as the BPF JIT emits them). The matrix kernels' limit is their BPF
 * instruction count per product against these rates (docs/performance.md,
 * "What stands in the way"), not one multiplier per cycle.
 *
 * usage: qwen3-bpf-issue-rate [ROUNDS]   (each round ~1 s; best round printed)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAINS 12
#define ITERS 100000000L

#define OPS(ins)                                                                                     \
  ins " %12,%0\n\t" ins " %12,%1\n\t" ins " %12,%2\n\t" ins " %12,%3\n\t" ins " %12,%4\n\t" ins \
      " %12,%5\n\t" ins " %12,%6\n\t" ins " %12,%7\n\t" ins " %12,%8\n\t" ins " %12,%9\n\t" ins  \
      " %12,%10\n\t" ins " %12,%11\n\t"

#define CHAIN_REGS                                                                                   \
  "+r"(r[0]), "+r"(r[1]), "+r"(r[2]), "+r"(r[3]), "+r"(r[4]), "+r"(r[5]), "+r"(r[6]), "+r"(r[7]), \
      "+r"(r[8]), "+r"(r[9]), "+r"(r[10]), "+r"(r[11])

/* Runs ITERS x CHAINS instructions `ins`; returns G instructions per second. */
#define RATE(ins)                                                            \
  ({                                                                         \
    uint64_t r[CHAINS] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};            \
    const uint64_t m = 0x9E3779B97F4A7C15ULL;                                \
    struct timespec t0, t1;                                                  \
    clock_gettime(CLOCK_MONOTONIC, &t0);                                     \
    for (long i = 0; i < ITERS; i++) __asm__ volatile(OPS(ins) : CHAIN_REGS : "r"(m)); \
    clock_gettime(CLOCK_MONOTONIC, &t1);                                     \
    sink ^= r[0] ^ r[11];                                                    \
    (double)CHAINS * ITERS / ((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9) / 1e9; \
  })

static uint64_t sink;

static double best(double a, double b) { return a > b ? a : b; }

int main(int argc, char **argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 3;
  if (rounds < 1 || rounds > 100) {
    fprintf(stderr, "usage: qwen3-bpf-issue-rate [ROUNDS 1..100]\n");
    return 2;
  }
  double imul = 0, add = 0, xor_ = 0;
  for (int k = 0; k < rounds; k++) { /* alternated, so a busy second hits each alike */
    imul = best(imul, RATE("imulq"));
    add = best(add, RATE("addq"));
    xor_ = best(xor_, RATE("xorq"));
  }
  printf("one core, %d independent chains, best of %d rounds (G instructions/s):\n", CHAINS, rounds);
  printf("imul %.2f\nadd  %.2f\nxor  %.2f\n", imul, add, xor_);
  return sink == 42 ? 1 : 0; /* keeps the chains live */
}
