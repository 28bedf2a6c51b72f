// The seeded draw (bpf_ops/draw.h), one rule for the kernel and user space:
//   - the generator is Philox4x32-10: Random123's known answers;
//   - its bits are uniform (chi-square over 256 cells, across draw indices,
//     across seeds, and of consecutive pairs) and so is the point it picks
//     in [0, total);
//   - qn_sample with QN_SAMPLE_DRAW picks the token draw_token picks in user
//     space from the same probabilities (bit for bit over random cases in
//     sample_test's EqualsModel*; here through the engine's entry points), and
//     its picks follow the kept probabilities (chi-square).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "draw.h"
#include "engine/sampling_kernel.h"
#include "sampling/kernel_params.h"
#include "sample_programs.h"
#include "sampling/sampler.h"

namespace qwen3::engine {
namespace {

// The chi-square statistic of `counts` against equal cells.
double chi_square_uniform(const std::vector<uint64_t>& counts, uint64_t n) {
  const double e = double(n) / double(counts.size());
  double chi = 0;
  for (uint64_t c : counts) chi += (double(c) - e) * (double(c) - e) / e;
  return chi;
}
// Chi-square with 255 degrees of freedom exceeds this with probability ~1e-6.
constexpr double kChi255 = 380.0;

TEST(Draw, PhiloxMatchesRandom123KnownAnswers) {
  // Random123 tests/kat_vectors, "philox4x32 10": counter, key, expected.
  struct Kat {
    qn_philox_ctr ctr;
    qn_u32 k0, k1;
    qn_philox_ctr want;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, 0, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff,
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0xa4093822, 0x299f31d0,
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const qn_philox_ctr got = qn_philox4x32_10(k.ctr, k.k0, k.k1);
    EXPECT_EQ(got.c0, k.want.c0);
    EXPECT_EQ(got.c1, k.want.c1);
    EXPECT_EQ(got.c2, k.want.c2);
    EXPECT_EQ(got.c3, k.want.c3);
  }
  // qn_draw_bits is its first two words for counter (index, QN_DRAW_STREAM) under the seed.
  const qn_philox_ctr x = qn_philox4x32_10({5, 1, QN_DRAW_STREAM, 0}, 0x89abcdef, 0x01234567);
  EXPECT_EQ(qn_draw_bits(0x0123456789abcdefull, (uint64_t(1) << 32) | 5), (uint64_t(x.c0) << 32) | x.c1);
}

TEST(Draw, BitsAreUniformAcrossIndicesAndSeeds) {
  const uint64_t n = 1 << 17;
  std::vector<uint64_t> top(256), low(256), mid(256), seeds(256), pairs(256);
  uint64_t prev = 0;
  for (uint64_t i = 0; i < n; i++) {
    const uint64_t b = qn_draw_bits(42, i);
    top[b >> 56]++;
    low[b & 255]++;
    mid[(b >> 30) & 255]++;
    seeds[qn_draw_bits(i, 7) >> 56]++;              // consecutive seeds, one index
    if (i) pairs[(prev >> 60) << 4 | (b >> 60)]++;  // consecutive draws, 4 bits each
    prev = b;
  }
  const double chi[] = {chi_square_uniform(top, n), chi_square_uniform(low, n), chi_square_uniform(mid, n),
                        chi_square_uniform(seeds, n), chi_square_uniform(pairs, n - 1)};
  const char* what[] = {"top byte", "low byte", "bits 30..37", "top byte over seeds", "consecutive pairs"};
  for (int k = 0; k < 5; k++) {
    std::printf("%s: chi-square %.1f (255 dof)\n", what[k], chi[k]);
    EXPECT_LT(chi[k], kChi255) << what[k];
  }
  // The point in [0, total): every value equally often, for a total that does not divide 2^64.
  std::vector<uint64_t> cells(255);
  for (uint64_t i = 0; i < n; i++) {
    const uint64_t r = qn_draw_point(qn_draw_bits(9, i), 255);
    ASSERT_LT(r, 255u);
    cells[r]++;
  }
  EXPECT_LT(chi_square_uniform(cells, n), kChi255 - 1.4);  // 254 dof
}

// The engine's entry points: kernel_sample_token (the draw in BPF) against
// draw_token over kernel_distribution (the draw in user space).
TEST(Draw, KernelPicksWhatUserSpacePicksFromTheSameProbabilities) {
  BpfPrograms& progs = programs(1000);
  std::mt19937_64 rng(17);
  std::normal_distribution<float> g(0.0f, 2.0f);
  const SamplingParams cases[] = {
      {.temperature = 1.0f},
      {.temperature = 0.6f, .top_k = 20, .top_p = 0.95f},
      {.temperature = 0.8f, .min_p = 0.05f, .repetition_penalty = 1.3f},
      {.temperature = 0.0f, .repetition_penalty = 1.5f},
  };
  for (const SamplingParams& base : cases) {
    for (int iter = 0; iter < 40; iter++) {
      PositionLogits s;
      s.full.resize(1000);
      for (auto& l : s.full) l = g(rng);
      const std::vector<int32_t> history = {int32_t(rng() % 1000), int32_t(rng() % 1000)};
      SamplingParams p = base;
      p.seed = rng();
      const uint64_t index = rng() % 100000;
      const auto d = kernel_distribution(progs, s, kernel_params(p), history);
      const auto t = kernel_sample_token(progs, s, kernel_params(p), history, index);
      ASSERT_TRUE(d && t);
      ASSERT_EQ(*t, draw_token(*d, p.seed, index)) << "T " << p.temperature << " iter " << iter;
    }
  }
}

// Over many draw indices the kernel's picks follow the kept probabilities.
TEST(Draw, KernelDrawsFollowTheProbabilities) {
  const uint32_t vocab = 1000;
  BpfPrograms& progs = programs(vocab);
  std::vector<qn_topk_entry> cand;
  for (int i = 0; i < 12; i++) cand.push_back({int32_t(100 + 7 * i), int32_t(-i * 40000)});  // 0.61 nats apart
  const qn_sample_hdr params = sample_hdr(kernel_params({.temperature = 1.0f, .top_p = 0.99f}), uint32_t(cand.size()));
  const auto seen = bitmap(vocab, {});
  const fixed::SampleOut m = fixed::sample_model(params, cand, seen);
  ASSERT_GE(m.kept.size(), 6u);
  std::map<int32_t, int> counts;
  const int n = 6000;
  for (int i = 0; i < n; i++) {
    qn_sample_hdr h = params;
    h.flags |= QN_SAMPLE_DRAW;
    h.seed = 2024;
    h.draw_index = uint64_t(i);
    run_kernel(progs, h, cand, seen);
    counts[progs.sample_hdr()->drawn_id]++;
  }
  double chi = 0;
  int cells = 0;
  for (const auto& e : m.kept) {
    const double expect = n * std::ldexp(double(e.w), -QN_SAMPLE_PFRAC);
    if (expect < 5) continue;  // too rare to judge
    chi += (counts[e.id] - expect) * (counts[e.id] - expect) / expect;
    cells++;
  }
  for (const auto& [id, c] : counts) {
    bool kept = false;
    for (const auto& e : m.kept) kept |= e.id == id;
    EXPECT_TRUE(kept) << "drew " << id << ", which was cut";
  }
  std::printf("%d cells, chi-square %.1f\n", cells, chi);
  EXPECT_LT(chi, cells + 5 * std::sqrt(2.0 * cells) + 10);  // well beyond the 0.999 quantile
}

}  // namespace
}  // namespace qwen3::engine
