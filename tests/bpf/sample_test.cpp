// qn_sample (bpf_ops/ops_sample.h), the sampling probabilities in the kernel:
//   - == its C++ model (tests/bpf/fixed_sample.h) bit for bit, on random and
//     edge inputs: all logits equal, one huge gap, penalty > 1 and < 1,
//     temperature at the 1e-3 floor and large, top_p tiny and 1, min_p near 1,
//     candidate lists of the whole vocabulary (151,936);
//   - against the float Sampler: the same kept set and a total-variation
//     distance within the bound derived from the fixed-point precision
//     (docs/numerics.md), wherever the float's own cut decisions are not
//     within that precision of their thresholds;
//   - uses the backend's exact Q16 logits where float cannot tell them apart
//     (above 256) or hold them (near 32768);
//   - rejects parameters outside its fixed-point ranges;
//   - its log-normalizer mode (QN_SAMPLE_LSE, the reported logprobs): == the
//     model (fixed::lse_model) bit for bit on random and edge inputs (one
//     candidate, all equal, a spread where the weights underflow, 151,936
//     candidates), within the derived bound of the exact log-sum-exp, and
//     position_logprobs built on it within that bound of the float log-softmax.
// Against the float Sampler: sample_float_test.cpp; the log-normalizer: sample_lse_test.cpp.
#include "sample_cases.h"

namespace qwen3::engine {
namespace {

using namespace samplecases;


TEST(SampleProgram, EqualsModelOnRandomInputs) {
  const uint32_t vocab = 5000;
  std::mt19937_64 rng(11);
  for (int iter = 0; iter < 600; iter++) {
    const uint32_t sizes[] = {1, 2, 20, 64, 300, vocab};
    const uint32_t n = sizes[rng() % 6];
    const double sigmas[] = {0.01, 0.5, 2.0, 8.0};
    Case c;
    c.cand = random_logits(rng, n, sigmas[rng() % 4], rng() % 2, vocab);
    c.params = random_params(rng);
    if (iter % 5 == 0) c.params.temperature = 0.0f;  // greedy (with or without penalty)
    c.history = random_history(rng, c.cand);
    expect_kernel_equals_model(c, vocab);
    if (HasFatalFailure()) return;
  }
}

TEST(SampleProgram, EqualsModelOnEdgeInputs) {
  const uint32_t vocab = 5000;
  std::mt19937_64 rng(5);
  std::vector<Case> cases;
  auto flat = [&](uint32_t n, int32_t v) {
    std::vector<qn_topk_entry> c(n);
    for (uint32_t i = 0; i < n; i++) c[i] = {int32_t(i), v};
    return c;
  };
  for (float tp : {1e-6f, 0.5f, 1.0f})  // all equal: the ties split by candidate order
    for (int k : {0, 1, 7, 4999})
      cases.push_back({flat(vocab, 3 << 16), {}, {.temperature = 1.0f, .top_k = k, .top_p = tp}});
  {
    auto c = flat(vocab, -(200 << 16));  // one huge gap: the rest weigh exactly 0
    c[1234].logit = 200 << 16;
    cases.push_back({c, {}, {.temperature = 1.0f}});
    cases.push_back({c, {}, {.temperature = 30000.0f, .top_p = 0.3f}});
    cases.push_back({c, {1234}, {.temperature = 1.0f, .repetition_penalty = 1e6f}});  // penalty clamped to 2^24
  }
  {
    auto c = flat(vocab, 0);  // saturated extremes
    c[0].logit = INT32_MAX;
    c[1].logit = -INT32_MAX;
    c[2].logit = INT32_MAX;
    cases.push_back({c, {0, 1}, {.temperature = 1e-3f, .repetition_penalty = 0.001f}});
    cases.push_back({c, {}, {.temperature = 1e9f, .min_p = 0.9999f}});
  }
  for (float T : {1e-3f, 1e-3f * 1.0001f, 0.6f, 1e4f, 1e12f})
    for (float pen : {1.0f, 1.5f, 0.5f})
      for (float mp : {0.0f, 0.9999f}) {
        Case c;
        c.cand = random_logits(rng, 64, 0.02, true, vocab);
        c.history = random_history(rng, c.cand);
        c.params = {.temperature = T, .top_k = 20, .top_p = 0.95f, .min_p = mp, .repetition_penalty = pen};
        cases.push_back(c);
      }
  for (const Case& c : cases) {
    expect_kernel_equals_model(c, vocab);
    if (HasFatalFailure()) return;
  }
}

TEST(SampleProgram, EqualsModelOverTheQwenVocabulary) {
  std::mt19937_64 rng(3);
  for (int iter = 0; iter < 12; iter++) {
    Case c;
    c.cand = random_logits(rng, kQwenVocab, iter % 2 ? 3.0 : 0.3, false, kQwenVocab);
    c.params = random_params(rng);
    if (iter < 4) c.params.top_k = iter == 0 ? 0 : 20 * iter;
    c.history = random_history(rng, c.cand);
    expect_kernel_equals_model(c, kQwenVocab);
    if (HasFatalFailure()) return;
  }
}

TEST(SampleProgram, RejectsParametersOutsideItsRanges) {
  BpfPrograms& progs = programs(1000);
  std::vector<qn_topk_entry> cand = {{1, 0}, {2, 1 << 16}};
  const auto seen = bitmap(1000, {});
  const qn_sample_hdr good = sample_hdr(kernel_params({.temperature = 1.0f}), 2);
  EXPECT_NO_THROW(run_kernel(progs, good, cand, seen));
  auto bad = [&](auto edit) {
    qn_sample_hdr h = good;
    edit(h);
    EXPECT_THROW(run_kernel(progs, h, cand, seen), Error);
  };
  bad([](qn_sample_hdr& h) { h.n = 0; });
  bad([](qn_sample_hdr& h) { h.n = 1001; });
  bad([](qn_sample_hdr& h) { h.tm = 5; });
  bad([](qn_sample_hdr& h) { h.te = 60; });
  bad([](qn_sample_hdr& h) { h.top_p_q32 = 0; });
  bad([](qn_sample_hdr& h) { h.min_p_q44 = uint64_t(1) << 44; });
  bad([](qn_sample_hdr& h) { h.flags |= QN_SAMPLE_PENALTY, h.pm = 3, h.pe = 1; });
  cand[1].id = 1000;  // outside the vocabulary
  EXPECT_THROW(run_kernel(progs, good, cand, seen), Error);
}

}  // namespace
}  // namespace qwen3::engine
